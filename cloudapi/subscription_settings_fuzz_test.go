package cloudapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// The bodies of the subscription settings, fuzzed like the other bodies (see
// fuzz_test.go): no 5xx, no change on a 4xx, one task per 2xx that ends without an
// internal error. Their seeds are given here rather than in testdata.

func FuzzMaintenanceWindows(f *testing.F) {
	fe := newFuzzEnv(f)
	for _, seed := range []string{``, `{}`, `null`, `[]`, `{"mode":"automatic"}`, `{"mode":"manual"}`,
		`{"mode":"manual","windows":[{"startHour":22,"durationInHours":8,"days":["Monday","Thursday"]}]}`,
		`{"mode":"manual","windows":[{"startHour":24,"durationInHours":3,"days":["Funday","Monday","Monday"]}]}`,
		`{"mode":"manual","windows":[{"days":[null]},{},{},{},{},{},{},{}]}`, `{"mode":"automatic","windows":[{"startHour":1}]}`,
		`{"mode":"manual","windows":[{"startHour":-9223372036854775808,"durationInHours":1e3,"days":"Monday"}]}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fe.use(t)
		fe.check(t, http.MethodPut, fmt.Sprintf("/v1/subscriptions/%d/maintenance-windows", fe.sub), body)
	})
}

func FuzzResourceTags(f *testing.F) {
	fe := newFuzzEnv(f)
	for _, seed := range []string{``, `{}`, `null`, `{"resourceTags":null}`, `{"resourceTags":[]}`,
		`{"resourceTags":[{"key":"a","value":"1"},{"key":"b","value":"2"}]}`, `{"resourceTags":[{"key":"a","value":"1"},{"key":"a","value":"2"}]}`,
		`{"resourceTags":[{"key":"","value":""},{"key":"k\u202e","value":"v"}]}`, `{"resourceTags":{"key":"a"}}`, `{"resourceTags":[null,1]}`,
		"{\"resourceTags\":[" + manyTags(65) + "]}"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fe.use(t)
		fe.check(t, http.MethodPut, fmt.Sprintf("/v1/subscriptions/%d/resource-tags", fe.sub), body)
	})
}

// FuzzCIDRAllowlist sends its bodies to a subscription on a customer cloud account, the
// only kind that takes an allow list, and to the internal one's.
func FuzzCIDRAllowlist(f *testing.F) {
	fe := newFuzzEnv(f)
	for _, seed := range []string{``, `{}`, `null`, `{"cidrIps":["10.0.0.0/8","2001:db8::/32"],"securityGroupIds":["sg-0123456789abcdef0"]}`,
		`{"cidrIps":["10.0.0.1/8","10.0.0.0/8","10.0.0.0/8"]}`, `{"cidrIps":[null,""],"securityGroupIds":["sg-1","sg-89abcdef","sg-89abcdef"]}`,
		`{"cidrIps":"10.0.0.0/8"}`, `{"securityGroupIds":[{}]}`, `{"cidrIps":["::/0","0.0.0.0/0","1.2.3.4/33"]}`} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	var customer int
	f.Fuzz(func(t *testing.T, body []byte, internal bool) {
		fe.use(t)
		if customer == 0 {
			customer = fe.customerSubscription("fuzz-byoc")
			// The baseline every input starts from now holds this subscription too.
			fe.baseline = fe.state(time.Now())
		}
		sub := customer
		if internal {
			sub = fe.sub
		}
		fe.check(t, http.MethodPut, fmt.Sprintf("/v1/subscriptions/%d/cidr", sub), body)
	})
}
