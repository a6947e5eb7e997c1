// An LD_PRELOAD library that counts the heap allocations made by sluice's I/O threads (the
// threads that name themselves "sluice-io-N", src/http/server.cpp), for the allocation test
// (tests/integration/allocations_test.cpp) and for finding where a request allocates.
//
//   SLUICE_ALLOC_COUNTER_FILE=/tmp/counts LD_PRELOAD=libsluice_alloc_counter.so sluice ...
//
// The file holds one little-endian uint64: the allocations (malloc, calloc, realloc,
// memalign, posix_memalign, aligned_alloc, valloc; operator new goes through malloc) made so
// far on the I/O threads; any process may read it while sluice runs. With
// SLUICE_ALLOC_BACKTRACE=1, each counted allocation also writes its stack to stderr
// (symbolize with addr2line or c++filt).
//
// Everything forwards to glibc's own allocator (__libc_malloc...): only counting is added.
// Not for sanitizer builds (their runtime must come first).
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" {
void* __libc_malloc(std::size_t size);
void* __libc_calloc(std::size_t count, std::size_t size);
void* __libc_realloc(void* pointer, std::size_t size);
void* __libc_memalign(std::size_t alignment, std::size_t size);
void* __libc_valloc(std::size_t size);
void __libc_free(void* pointer);
}

namespace {

std::uint64_t* g_counter = nullptr;  // in the shared file
bool g_backtrace = false;
__attribute__((tls_model("initial-exec"))) thread_local bool t_io_thread = false;
__attribute__((tls_model("initial-exec"))) thread_local bool t_in_backtrace = false;

__attribute__((constructor)) void openCounter() {
  const char* path = std::getenv("SLUICE_ALLOC_COUNTER_FILE");
  const char* trace = std::getenv("SLUICE_ALLOC_BACKTRACE");
  g_backtrace = trace != nullptr && trace[0] == '1';
  if (path == nullptr) {
    return;
  }
  int fd = ::open(path, O_RDWR | O_CREAT, 0600);
  if (fd < 0 || ::ftruncate(fd, 4096) != 0) {
    return;
  }
  void* map = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map != MAP_FAILED) {
    g_counter = static_cast<std::uint64_t*>(map);
  }
}

inline void count() {
  if (!t_io_thread) {
    return;
  }
  if (g_counter != nullptr) {
    __atomic_fetch_add(g_counter, 1, __ATOMIC_RELAXED);
  }
  if (g_backtrace && !t_in_backtrace) {
    t_in_backtrace = true;
    void* frames[32];
    int n = ::backtrace(frames, 32);
    static const char kSeparator[] = "--- allocation on an I/O thread\n";
    (void)!::write(2, kSeparator, sizeof kSeparator - 1);
    ::backtrace_symbols_fd(frames, n, 2);
    t_in_backtrace = false;
  }
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* malloc(std::size_t size) {
  count();
  return __libc_malloc(size);
}

__attribute__((visibility("default"))) void free(void* pointer) { __libc_free(pointer); }

__attribute__((visibility("default"))) void* calloc(std::size_t count_, std::size_t size) {
  count();
  return __libc_calloc(count_, size);
}

__attribute__((visibility("default"))) void* realloc(void* pointer, std::size_t size) {
  count();
  return __libc_realloc(pointer, size);
}

__attribute__((visibility("default"))) void* memalign(std::size_t alignment, std::size_t size) {
  count();
  return __libc_memalign(alignment, size);
}

__attribute__((visibility("default"))) void* aligned_alloc(std::size_t alignment,
                                                           std::size_t size) {
  count();
  return __libc_memalign(alignment, size);
}

__attribute__((visibility("default"))) int posix_memalign(void** out, std::size_t alignment,
                                                          std::size_t size) {
  count();
  void* pointer = __libc_memalign(alignment, size);
  if (pointer == nullptr) {
    return ENOMEM;
  }
  *out = pointer;
  return 0;
}

__attribute__((visibility("default"))) void* valloc(std::size_t size) {
  count();
  return __libc_valloc(size);
}

/// Sluice's I/O threads name themselves "sluice-io-N": from then on their allocations count.
__attribute__((visibility("default"))) int pthread_setname_np(pthread_t thread, const char* name) {
  using Real = int (*)(pthread_t, const char*);
  static Real real = reinterpret_cast<Real>(::dlsym(RTLD_NEXT, "pthread_setname_np"));
  if (pthread_equal(thread, pthread_self()) && std::strncmp(name, "sluice-io", 9) == 0) {
    t_io_thread = true;
  }
  return real != nullptr ? real(thread, name) : ENOSYS;
}

}  // extern "C"
