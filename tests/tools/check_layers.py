#!/usr/bin/env python3
"""Fails on an #include against the layering of docs/architecture.md ("Layers").

Run by CTest (`layering_includes`), or by hand: tests/tools/check_layers.py [SOURCE_DIR]

What it holds every file to (quoted includes; angle includes are third-party):
- A module's files (`src/<module>/`, `include/sluice/<module>/`) include the public headers
  (`sluice/<m>/...`) of that module and of the modules below it only, and private headers
  (`<m>/...`, resolved against `src/`) of their own module only. Public headers include no
  private header at all. `src/main.cpp` belongs to app.
- A third-party library (yaml-cpp, nlohmann/json, spdlog, hiredis, Boost, gRPC, date) is included
  only by a module that links it (`sluice_module(...)` in CMakeLists.txt, or a public
  dependency of a module it links).
- Tests include public headers, and the private headers of the one module they test only:
  `tests/unit/<module>/` that module; `tests/conformance/` the store (the stores checked
  against each other); `tests/fuzz/` http and grpc (the harnesses drive the transports'
  codecs) and the memory snapshot's file format (`store/memory/snapshot_format.hpp`, to
  write well-formed files of hostile states). Integration
  tests and their support drive the binary from outside; the one private header they may
  include is the store's Redis Cluster hash-slot function (`store/redis/cluster_slots.hpp`),
  to place test keys on chosen nodes. bench/ includes public headers only.
- No include climbs out of its directory (`..`).
Every violation is printed as `file:line: message`; the exit status is 1 if there is any.
"""

import pathlib
import re
import sys

# Each module and the modules it may use, as docs/architecture.md draws them.
LAYERS = {
    "common": [],
    "limiter": ["common"],
    "rules": ["common", "limiter"],
    "store": ["common", "limiter", "rules"],
    "decision": ["common", "limiter", "rules", "store"],
    "http": ["common", "limiter", "rules", "store", "decision"],
    "grpc": ["common", "limiter", "rules", "store", "decision"],
    "xds": ["common", "limiter", "rules"],
    "simulate": ["common", "limiter", "rules", "store", "decision"],
    "app": ["common", "limiter", "rules", "store", "decision", "simulate", "http", "grpc", "xds"],
}

# Third-party include prefixes and the CMake target that brings each.
THIRD_PARTY = {
    "yaml-cpp/": "yaml-cpp",
    "nlohmann/": "nlohmann_json::nlohmann_json",
    "spdlog/": "spdlog::spdlog",
    "hiredis/": "PkgConfig::HIREDIS",
    "boost/": "Boost::headers",
    "grpcpp/": "gRPC::grpc++_reflection",
    "grpc/": "gRPC::grpc++_reflection",
    "google/protobuf/": "sluice_rls_proto",
    "absl/": "absl::synchronization",
    "date/": "date::date-tz",
}

# Public dependencies of targets that are not modules (what linking them brings).
EXTERNAL_PUBLIC = {
    "sluice_rls_proto": ["gRPC::grpc++_reflection", "absl::synchronization"],
    "gRPC::grpc++_reflection": ["absl::synchronization", "sluice_rls_proto"],
    "sluice_xds_proto": ["gRPC::grpc++", "sluice_rls_proto"],
    "sluice_kuadrant_proto": ["sluice_rls_proto", "gRPC::grpc++_reflection", "absl::synchronization"],
    "gRPC::grpc++": ["gRPC::grpc++_reflection", "sluice_rls_proto"],
}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def module_targets(root):
    """module -> (public deps, private deps) from the sluice_module(...) calls."""
    text = (root / "CMakeLists.txt").read_text()
    out = {}
    for call in re.finditer(r"sluice_module\(([^)]*)\)", text):
        words = call.group(1).split()
        if len(words) < 2 or not words[1].startswith("src/"):
            continue
        module = words[1][len("src/"):]
        public, private, section = [], [], None
        for word in words[2:]:
            if word in ("PUBLIC_DEPS", "PRIVATE_DEPS", "EXTRA_SOURCES"):
                section = word
            elif section == "PUBLIC_DEPS":
                public.append(word)
            elif section == "PRIVATE_DEPS":
                private.append(word)
        out[module] = (public, private)
    return out


def visible_targets(module, targets):
    """Every target whose headers `module` may include: its own links and, through them,
    their public links."""
    by_target = {f"sluice_{m}": deps for m, deps in targets.items()}
    public, private = targets.get(module, ([], []))
    seen, stack = set(), list(public) + list(private)
    while stack:
        target = stack.pop()
        if target in seen:
            continue
        seen.add(target)
        stack.extend(by_target.get(target, ([], []))[0])
        stack.extend(EXTERNAL_PUBLIC.get(target, []))
    return seen


def test_private_rule(relative):
    """(modules whose private headers a test file may include, single allowed headers)."""
    parts = relative.parts
    if parts[:2] == ("tests", "unit") and len(parts) > 3:
        return {parts[2]}, set()
    if parts[:2] == ("tests", "conformance"):
        return {"store"}, set()
    if parts[:2] == ("tests", "fuzz"):
        return {"http", "grpc"}, {"store/memory/snapshot_format.hpp"}
    if parts[:2] in (("tests", "integration"), ("tests", "support")):
        return set(), {"store/redis/cluster_slots.hpp"}
    return set(), set()


def owning_module(relative):
    """The module a source or public header belongs to, or None for tests and tools."""
    parts = relative.parts
    if parts[0] == "src":
        return "app" if parts[1] == "main.cpp" else parts[1]
    if parts[:2] == ("include", "sluice"):
        return parts[2]
    return None


def check_file(path, root, targets, problems):
    relative = path.relative_to(root)
    module = owning_module(relative)
    public_header = relative.parts[0] == "include"
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        match = INCLUDE.match(line)
        if not match:
            continue
        kind, name = match.groups()
        where = f"{relative}:{number}"
        if ".." in pathlib.PurePosixPath(name).parts:
            problems.append(f"{where}: \"{name}\" climbs out of its directory")
            continue
        first = name.split("/")[0]
        if kind == "<":
            if module is None:
                continue
            for prefix, target in THIRD_PARTY.items():
                if name.startswith(prefix) and target not in visible_targets(module, targets):
                    problems.append(
                        f"{where}: <{name}> is {target}'s, which sluice_{module} does not link "
                        "(CMakeLists.txt)")
            continue
        if first == "sluice" and len(name.split("/")) > 2:
            used = name.split("/")[1]
            if module is not None and used != module and used not in LAYERS.get(module, []):
                problems.append(f"{where}: {module} may not use {used} (\"{name}\"; "
                                "docs/architecture.md, Layers)")
            if not (root / "include" / name).is_file():
                problems.append(f"{where}: \"{name}\" is not a public header")
            continue
        if first not in LAYERS:
            continue  # generated code (the RLS protos) or a test's own helper
        if module is not None:
            if public_header:
                problems.append(f"{where}: a public header includes the private \"{name}\"")
            elif first != module:
                problems.append(
                    f"{where}: \"{name}\" is private to {first}; publish what {module} needs "
                    f"in include/sluice/{first}/")
            continue
        modules, headers = test_private_rule(relative)
        if first not in modules and name not in headers:
            problems.append(f"{where}: a test of {sorted(modules) or 'the binary'} includes "
                            f"\"{name}\", private to {first} (tests/tools/check_layers.py)")


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                        pathlib.Path(__file__).resolve().parents[2]).resolve()
    targets = module_targets(root)
    missing = sorted(set(LAYERS) - set(targets))
    problems = [f"CMakeLists.txt: no sluice_module for src/{m}" for m in missing]
    files = []
    for top in ("src", "include", "tests", "bench"):
        for suffix in ("*.cpp", "*.hpp", "*.h", "*.cc"):
            files.extend((root / top).rglob(suffix))
    for path in sorted(set(files)):
        if "results" in path.relative_to(root).parts:
            continue
        check_file(path, root, targets, problems)
    for problem in problems:
        print(problem)
    print(f"check_layers: {len(files)} files, {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
