package cloudapi_test

import (
	"fmt"
	"net/http"
	"testing"
)

// The bodies of the ACL endpoints, fuzzed like the other bodies (see fuzz_test.go): no
// 5xx, no change on a 4xx, one task per 2xx that ends without an internal error. Each
// input starts from the baseline, where the account has the default rules only: the
// updates of ids 4 and 1 fail their task with the resource's 404 unless the input made
// it... which it cannot, so they test the refusals and the bodies' shapes.

func FuzzACLRule(f *testing.F) {
	fe := newFuzzEnv(f)
	for _, seed := range []string{``, `{}`, `null`, `{"name":"r","redisRule":"+@read ~*"}`, `{"name":"r","redisRule":"+@all  ~*"}`,
		`{"name":"Full-Access","redisRule":"+@all ~*"}`, `{"name":"x","redisRule":"let-me-create-resources"}`,
		`{"name":"x","redisRule":"(+config ~*)"}`, `{"name":"x","redisRule":"on >pass +@all"}`, `{"name":"x","redisRule":"+get\n~*"}`,
		`{"name":"\u0000","redisRule":"%RW~a* &ch resetchannels"}`, `{"name":["r"],"redisRule":1}`} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, update bool) {
		fe.use(t)
		if update {
			fe.check(t, http.MethodPut, "/v1/acl/redisRules/4", body)
			return
		}
		fe.check(t, http.MethodPost, "/v1/acl/redisRules", body)
	})
}

func FuzzACLRole(f *testing.F) {
	fe := newFuzzEnv(f)
	for _, seed := range []string{``, `{}`, `null`, `{"name":"role","redisRules":[]}`,
		`{"name":"role","redisRules":[{"ruleName":"Read-Only","databases":[{"subscriptionId":%[1]d,"databaseId":%[2]d}]}]}`,
		`{"name":"role","redisRules":[{"ruleName":"Read-Only","databases":[{"subscriptionId":%[1]d,"databaseId":%[2]d,"regions":["us-east-1"]}]}]}`,
		`{"name":"role","redisRules":[{"ruleName":"Read-Only","databases":[{"subscriptionId":%[1]d,"databaseId":%[2]d}]},{"ruleName":"Full-Access","databases":[{"subscriptionId":%[1]d,"databaseId":%[2]d}]}]}`,
		`{"name":"role","redisRules":[{"ruleName":"nope","databases":[{"subscriptionId":999,"databaseId":-1}]}]}`,
		`{"name":"role","redisRules":[null,{"databases":null}]}`} {
		f.Add([]byte(fmt.Sprintf(seed, fe.sub, fe.db)), false)
		f.Add([]byte(fmt.Sprintf(seed, fe.sub, fe.db)), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, update bool) {
		fe.use(t)
		if update {
			fe.check(t, http.MethodPut, "/v1/acl/roles/1", body)
			return
		}
		fe.check(t, http.MethodPost, "/v1/acl/roles", body)
	})
}

func FuzzACLUser(f *testing.F) {
	fe := newFuzzEnv(f)
	for _, seed := range []string{``, `{}`, `null`, `{"name":"u","role":"role","password":"Fuzz.pa55word"}`,
		`{"name":"default","role":"role","password":"Fuzz.pa55word"}`, `{"name":"u u","role":"role","password":"short"}`,
		`{"name":"u","role":"nope","password":"I do not meet requirements"}`, `{"role":"role","password":"Fuzz.n3w-word"}`,
		`{"name":"clouddb-internal","role":["role"],"password":null}`} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, update bool) {
		fe.use(t)
		if update {
			fe.check(t, http.MethodPut, "/v1/acl/users/1", body)
			return
		}
		fe.check(t, http.MethodPost, "/v1/acl/users", body)
	})
}
