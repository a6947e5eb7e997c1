"""ShouldRateLimit through a real gRPC client against the real sluice binary, over TCP and a
unix socket: the mapping of decisions onto RateLimitResponse, and envoyproxy/ratelimit's
service test cases (test/service/ratelimit_test.go) that apply to a real server."""

import os
import tempfile
import time
import unittest

import grpc

from rls_support import (Code, Sluice, Unit, UnitEnum, headers_of, request)

RULES = {
    "auth.yaml": """domain: auth
descriptors:
  - key: auth_type
    value: login
    rate_limit:
      name: login
      unit: minute
      requests_per_unit: 2
  - key: nameless
    rate_limit:
      unit: hour
      requests_per_unit: 3
  - key: free
    rate_limit:
      unlimited: true
  - key: weekly
    rate_limit:
      name: weekly
      unit: week
      requests_per_unit: 100
  - key: thirty
    rate_limit:
      name: thirty
      unit: second
      unit_multiplier: 30
      requests_per_unit: 10
  - key: sixty
    rate_limit:
      name: sixty
      unit: second
      unit_multiplier: 60
      requests_per_unit: 10
  - key: shadow
    shadow_mode: true
    rate_limit:
      name: shadow
      unit: minute
      requests_per_unit: 1
  - key: hits
    rate_limit:
      name: hits
      unit: minute
      requests_per_unit: 5
  - key: tagged
    metadata:
      team: payments
    rate_limit:
      name: tagged
      unit: minute
      requests_per_unit: 100
""",
    # envoyproxy/ratelimit's TestService domain: foo=bar limited 10/minute, hello=world no rule.
    "different.yaml": """domain: different-domain
descriptors:
  - key: foo
    value: bar
    rate_limit:
      name: key_name
      unit: minute
      requests_per_unit: 1
  - key: shadowed
    shadow_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 1
""",
}


class ServiceCases:
    """The cases, run once per transport (subclasses give the address)."""

    sluice = None
    args = ()

    @classmethod
    def setUpClass(cls):
        cls.sluice = Sluice(RULES, args=cls.args, grpc_listen=cls.listen())

    @classmethod
    def tearDownClass(cls):
        cls.sluice.close()

    def call(self, domain, descriptors, hits_addend=0):
        return self.stub.ShouldRateLimit(request(domain, descriptors, hits_addend), timeout=5)

    def setUp(self):
        # The tests count within minute (and hour) windows: none starts in a minute's last 3 s
        # (at most 3 s of waiting), so no window rolls over between one test's calls.
        into_minute = time.time() % 60
        if into_minute > 57:
            time.sleep(60 - into_minute + 0.05)
        self.stub = self.sluice.stub()

    def test_allows_then_denies_with_the_rate_limit_headers(self):
        first = self.call("auth", [[("auth_type", "login")]])
        self.assertEqual(first.overall_code, Code.OK)
        self.assertEqual(len(first.statuses), 1)
        status = first.statuses[0]
        self.assertEqual(status.code, Code.OK)
        self.assertEqual(status.current_limit.name, "login")
        self.assertEqual(status.current_limit.requests_per_unit, 2)
        self.assertEqual(status.current_limit.unit, Unit.MINUTE)
        self.assertEqual(status.limit_remaining, 1)
        self.assertTrue(1 <= status.duration_until_reset.seconds <= 60)
        headers = headers_of(first)
        self.assertEqual(headers["X-Ratelimit-Limit"], "2")
        self.assertEqual(headers["X-Ratelimit-Remaining"], "1")
        self.assertEqual(headers["RateLimit-Policy"], '"login";q=2;w=60')
        self.assertNotIn("Retry-After", headers)

        second = self.call("auth", [[("auth_type", "login")]])
        self.assertEqual(second.overall_code, Code.OK)
        self.assertEqual(second.statuses[0].limit_remaining, 0)

        third = self.call("auth", [[("auth_type", "login")]])
        self.assertEqual(third.overall_code, Code.OVER_LIMIT)
        self.assertEqual(third.statuses[0].code, Code.OVER_LIMIT)
        self.assertEqual(third.statuses[0].limit_remaining, 0)
        headers = headers_of(third)
        self.assertEqual(headers["X-Ratelimit-Remaining"], "0")
        self.assertGreaterEqual(int(headers["Retry-After"]), 1)
        self.assertEqual(headers["Retry-After"], headers["X-Ratelimit-Retry-After"])

    def test_no_rule_and_unknown_domain_are_ok_without_a_limit(self):
        # envoyproxy/ratelimit TestService, first request: no limit -> OK, no current_limit.
        for domain in ("auth", "no-such-domain"):
            response = self.call(domain, [[("hello", "world")]])
            self.assertEqual(response.overall_code, Code.OK)
            self.assertEqual(len(response.statuses), 1)
            self.assertEqual(response.statuses[0].code, Code.OK)
            self.assertFalse(response.statuses[0].HasField("current_limit"))
            self.assertEqual(response.statuses[0].limit_remaining, 0)
            self.assertEqual(len(response.response_headers_to_add), 0)

    def test_one_status_per_descriptor_in_request_order(self):
        # envoyproxy/ratelimit TestService: "make sure order does not affect results".
        self.call("different-domain", [[("foo", "bar")]])  # uses up the limit of 1
        response = self.call("different-domain", [[("foo", "bar")], [("hello", "world")]])
        self.assertEqual(response.overall_code, Code.OVER_LIMIT)
        self.assertEqual([s.code for s in response.statuses], [Code.OVER_LIMIT, Code.OK])
        self.assertEqual(response.statuses[0].current_limit.name, "key_name")
        self.assertFalse(response.statuses[1].HasField("current_limit"))

        response = self.call("different-domain", [[("hello", "world")], [("foo", "bar")]])
        self.assertEqual(response.overall_code, Code.OVER_LIMIT)
        self.assertEqual([s.code for s in response.statuses], [Code.OK, Code.OVER_LIMIT])
        self.assertEqual(response.statuses[1].current_limit.requests_per_unit, 1)

    def test_a_shadow_rule_over_its_limit_answers_ok(self):
        # envoyproxy/ratelimit TestRuleShadowMode and TestMixedRuleShadowMode.
        for _ in range(3):
            response = self.call("different-domain", [[("shadowed", "x")], [("hello", "world")]])
            self.assertEqual(response.overall_code, Code.OK)
            self.assertEqual([s.code for s in response.statuses], [Code.OK, Code.OK])
        response = self.call("auth", [[("shadow", "a")]])
        response = self.call("auth", [[("shadow", "a")], [("auth_type", "mixed-no-rule")]])
        self.assertEqual(response.overall_code, Code.OK)

    def test_empty_domain_is_invalid_argument(self):
        # envoyproxy/ratelimit TestEmptyDomain.
        with self.assertRaises(grpc.RpcError) as caught:
            self.call("", [[("hello", "world")]])
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("domain", caught.exception.details())

    def test_no_descriptors_is_invalid_argument(self):
        # envoyproxy/ratelimit TestEmptyDescriptors.
        with self.assertRaises(grpc.RpcError) as caught:
            self.call("auth", [])
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("descriptors", caught.exception.details())

    def test_an_empty_key_is_invalid_argument_with_its_location(self):
        with self.assertRaises(grpc.RpcError) as caught:
            self.call("auth", [[("a", "b")], [("", "x")]])
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("descriptors[1].entries[0].key", caught.exception.details())

    def test_unlimited_answers_ok_with_the_largest_remaining(self):
        # envoyproxy/ratelimit TestUnlimited: no current_limit, limit_remaining MaxUint32.
        for _ in range(3):
            response = self.call("auth", [[("free", "anything")]])
            self.assertEqual(response.overall_code, Code.OK)
            self.assertEqual(response.statuses[0].code, Code.OK)
            self.assertEqual(response.statuses[0].limit_remaining, 4294967295)
            self.assertFalse(response.statuses[0].HasField("current_limit"))

    def test_a_limit_without_name_has_no_name(self):
        response = self.call("auth", [[("nameless", "n1")]])
        self.assertEqual(response.statuses[0].current_limit.name, "")
        self.assertEqual(response.statuses[0].current_limit.requests_per_unit, 3)
        self.assertEqual(response.statuses[0].current_limit.unit, Unit.HOUR)

    def test_units_week_and_sluice_only_windows(self):
        weekly = self.call("auth", [[("weekly", "w")]]).statuses[0].current_limit
        self.assertEqual(weekly.unit, Unit.WEEK)
        self.assertEqual(int(weekly.unit), 7)
        # 30 x second has no envoy unit: UNKNOWN, the window is in RateLimit-Policy.
        response = self.call("auth", [[("thirty", "t")]])
        self.assertEqual(response.statuses[0].current_limit.unit, Unit.UNKNOWN)
        self.assertEqual(response.statuses[0].current_limit.requests_per_unit, 10)
        self.assertEqual(headers_of(response)["RateLimit-Policy"], '"thirty";q=10;w=30')
        self.assertTrue(1 <= response.statuses[0].duration_until_reset.seconds <= 30)
        # 60 x second is exactly a minute.
        sixty = self.call("auth", [[("sixty", "s")]]).statuses[0].current_limit
        self.assertEqual(sixty.unit, Unit.MINUTE)

    def test_hits_addend_is_the_cost_and_zero_means_one(self):
        response = self.call("auth", [[("hits", "h1")]], hits_addend=3)
        self.assertEqual(response.statuses[0].limit_remaining, 2)
        response = self.call("auth", [[("hits", "h1")]], hits_addend=0)
        self.assertEqual(response.statuses[0].limit_remaining, 1)
        response = self.call("auth", [[("hits", "h1")]], hits_addend=2)
        self.assertEqual(response.overall_code, Code.OVER_LIMIT)
        # Counted all the same, as envoy counts every matched limit (--envoy-charge every):
        # 6 of 5, so the next request is denied too.
        response = self.call("auth", [[("hits", "h1")]], hits_addend=1)
        self.assertEqual(response.overall_code, Code.OVER_LIMIT)
        self.assertEqual(response.statuses[0].limit_remaining, 0)

    def test_descriptor_hits_addend_overrides_the_request(self):
        response = self.call("auth", [{"entries": [("hits", "h2")], "hits_addend": 4}],
                             hits_addend=1)
        self.assertEqual(response.statuses[0].limit_remaining, 1)

    def test_rules_metadata_comes_back_as_dynamic_metadata(self):
        # envoyproxy/ratelimit's shape, the same object as /json's dynamicMetadata: the
        # request, and the metadata of the descriptors that passed under "metadata".
        response = self.call("auth", [[("tagged", "x")]])
        fields = response.dynamic_metadata.fields
        self.assertEqual(fields["domain"].string_value, "auth")
        self.assertEqual(fields["metadata"].struct_value.fields["team"].string_value, "payments")
        entries = fields["descriptors"].list_value.values[0].struct_value.fields["entries"]
        self.assertEqual(entries.list_value.values[0].string_value, "tagged=x")

    def test_a_request_limit_override_replaces_the_rules_for_its_descriptor(self):
        # envoy's RateLimitOverride: 2 per minute for this descriptor, whatever the rules say
        # ("tagged" allows 100); the bucket is keyed by the entries and the unit.
        descriptor = {"entries": [("tagged", "override")], "limit": (2, UnitEnum.MINUTE)}
        for remaining in (1, 0):
            response = self.call("auth", [descriptor])
            self.assertEqual(response.overall_code, Code.OK)
            self.assertEqual(response.statuses[0].current_limit.requests_per_unit, 2)
            self.assertEqual(response.statuses[0].current_limit.unit, Unit.MINUTE)
            self.assertEqual(response.statuses[0].current_limit.name, "")
            self.assertEqual(response.statuses[0].limit_remaining, remaining)
        response = self.call("auth", [descriptor])
        self.assertEqual(response.overall_code, Code.OVER_LIMIT)
        # The rules still apply to the same descriptor without the override.
        response = self.call("auth", [[("tagged", "override")]])
        self.assertEqual(response.overall_code, Code.OK)
        self.assertEqual(response.statuses[0].current_limit.requests_per_unit, 100)

    def test_an_override_with_an_unknown_unit_is_invalid_argument(self):
        with self.assertRaises(grpc.RpcError) as caught:
            self.call("auth", [{"entries": [("tagged", "y")], "limit": (2, UnitEnum.UNKNOWN)}])
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("descriptors[0].limit.unit", caught.exception.details())

    def test_grpc_and_json_share_one_pipeline_and_its_counters(self):
        descriptor = [("auth_type", "shared-with-json")]
        # No rule for that value: both answer OK with no limit, the same shape.
        status, body, _ = self.sluice.post_json(
            "/json", {"domain": "auth",
                      "descriptors": [{"entries": [{"key": k, "value": v}
                                                   for k, v in descriptor]}]})
        self.assertEqual(status, 200)
        self.assertEqual(body["overallCode"], "OK")
        # A limited descriptor: one call through /json, the next through gRPC sees it.
        status, body, _ = self.sluice.post_json(
            "/json", {"domain": "auth",
                      "descriptors": [{"entries": [{"key": "hits", "value": "shared"}]}]})
        self.assertEqual(body["statuses"][0]["limitRemaining"], 4)
        response = self.call("auth", [[("hits", "shared")]])
        self.assertEqual(response.statuses[0].limit_remaining, 3)
        metrics = self.sluice.metrics()
        self.assertIn('grpc_calls_total{code="OK"}', metrics)


class OverTcp(ServiceCases, unittest.TestCase):
    @classmethod
    def listen(cls):
        return None  # a free loopback port


class OverUnixSocket(ServiceCases, unittest.TestCase):
    @classmethod
    def listen(cls):
        cls.socket_dir = tempfile.mkdtemp(prefix="sluice-grpc-uds-")
        return ["unix:" + os.path.join(cls.socket_dir, "rls.sock")]

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        os.rmdir(cls.socket_dir)  # empty: the socket file was removed on exit


class HeadersSwitchedOff(unittest.TestCase):
    def test_no_response_headers_when_switched_off(self):
        sluice = Sluice(RULES, args=["--grpc-response-headers", "false"])
        try:
            response = sluice.stub().ShouldRateLimit(
                request("auth", [[("auth_type", "login")]]), timeout=5)
            self.assertEqual(response.statuses[0].current_limit.name, "login")
            self.assertEqual(len(response.response_headers_to_add), 0)
        finally:
            sluice.close()


if __name__ == "__main__":
    unittest.main()
