package clouddb_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

func validSubscription() clouddb.SubscriptionSpec {
	return clouddb.SubscriptionSpec{Name: "s", CloudProviders: []clouddb.CloudProvider{{Regions: []clouddb.Region{{Region: "us-east-1"}}}},
		Databases: []clouddb.DatabaseSpec{{Name: "d", DatasetSizeInGB: 1}}}
}

func validDatabase() clouddb.DatabaseSpec {
	return clouddb.DatabaseSpec{Name: "d", MemoryLimitInGB: 1, Password: "pw"}
}

func validCloudAccount() clouddb.CloudAccountSpec {
	p := func(s string) *string { return &s }
	return clouddb.CloudAccountSpec{Name: p("c"), AccessKeyID: p("k"), AccessSecretKey: p("s"), ConsoleUsername: p("u"),
		ConsolePassword: p("p"), SignInLoginURL: p("https://console.example.com/")}
}

func tags(n, keyLen, valueLen int) []clouddb.Tag {
	out := make([]clouddb.Tag, n)
	for i := range out {
		key := strconv.Itoa(i)
		out[i] = clouddb.Tag{Key: key + strings.Repeat("k", max(keyLen-len(key), 0)), Value: strings.Repeat("v", valueLen)}
	}
	return out
}

func list(n int, elem string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = elem
	}
	return out
}

// TestLimits: every cap on what a user writes accepts a value at the limit and refuses
// one past it with a 400 naming the field and the limit. Lengths count characters, so
// each string is made of a two-byte character.
func TestLimits(t *testing.T) {
	s := func(n int) string { return strings.Repeat("é", n) }
	sub := func(edit func(*clouddb.SubscriptionSpec)) error {
		spec := validSubscription()
		edit(&spec)
		return spec.Validate()
	}
	db := func(edit func(*clouddb.DatabaseSpec)) error {
		spec := validDatabase()
		edit(&spec)
		return spec.ValidateCreate()
	}
	ca := func(edit func(*clouddb.CloudAccountSpec)) error {
		spec := validCloudAccount()
		edit(&spec)
		return spec.ValidateCreate()
	}
	cases := []struct {
		name  string
		limit int
		// check validates a body holding a value of size n.
		check func(n int) error
		// want is in the refusal's description.
		want string
	}{
		{"subscription name", 40, func(n int) error { return sub(func(b *clouddb.SubscriptionSpec) { b.Name = s(n) }) }, "subscription: name must be at most 40 characters"},
		{"subscription update name", 40, func(n int) error {
			name := s(n)
			return (&clouddb.SubscriptionUpdate{Name: &name}).Validate()
		}, "subscription: name must be at most 40 characters"},
		{"region", 64, func(n int) error {
			return sub(func(b *clouddb.SubscriptionSpec) { b.CloudProviders[0].Regions[0].Region = s(n) })
		}, "subscription: cloudProviders[0].regions[0].region must be at most 64 characters"},
		{"zones", 100, func(n int) error {
			return sub(func(b *clouddb.SubscriptionSpec) {
				b.CloudProviders[0].Regions[0].PreferredAvailabilityZones = list(n, "z")
			})
		}, "subscription: cloudProviders[0].regions[0].preferredAvailabilityZones may hold at most 100 elements"},
		{"zone", 64, func(n int) error {
			return sub(func(b *clouddb.SubscriptionSpec) {
				b.CloudProviders[0].Regions[0].PreferredAvailabilityZones = []string{s(n)}
			})
		}, "subscription: cloudProviders[0].regions[0].preferredAvailabilityZones[0] must be at most 64 characters"},
		{"vpc id", 64, func(n int) error {
			return sub(func(b *clouddb.SubscriptionSpec) { b.CloudProviders[0].Regions[0].Networking.VpcID = s(n) })
		}, "subscription: cloudProviders[0].regions[0].networking.vpcId must be at most 64 characters"},
		{"resource tags", 64, func(n int) error {
			return sub(func(b *clouddb.SubscriptionSpec) { b.CloudProviders[0].ResourceTags = tags(n, 3, 3) })
		}, "subscription: cloudProviders[0].resourceTags may hold at most 64 elements"},
		{"plan databases", 100, func(n int) error {
			return sub(func(b *clouddb.SubscriptionSpec) {
				b.Databases = nil
				for i := range n {
					b.Databases = append(b.Databases, clouddb.DatabaseSpec{Name: "d" + strconv.Itoa(i), DatasetSizeInGB: 1})
				}
			})
		}, "subscription: databases may hold at most 100 elements"},
		{"database name", 40, func(n int) error { return db(func(b *clouddb.DatabaseSpec) { b.Name = strings.Repeat("a", n) }) }, "database: name must be at most 40 characters"},
		{"tags", 64, func(n int) error { return db(func(b *clouddb.DatabaseSpec) { b.Tags = tags(n, 3, 3) }) }, "database: tags may hold at most 64 elements"},
		{"tag key", 128, func(n int) error { return db(func(b *clouddb.DatabaseSpec) { b.Tags = tags(1, n, 1) }) }, "database: tags[0].key must be at most 128 characters"},
		{"tag value", 256, func(n int) error {
			return db(func(b *clouddb.DatabaseSpec) { b.Tags = []clouddb.Tag{{Key: "k", Value: s(n)}} })
		}, "database: tags[0].value must be at most 256 characters"},
		{"regexRules", 32, func(n int) error { return db(func(b *clouddb.DatabaseSpec) { b.RegexRules = list(n, "(?<tag>.*)") }) }, "database: regexRules may hold at most 32 elements"},
		{"regexRule", 256, func(n int) error { return db(func(b *clouddb.DatabaseSpec) { b.RegexRules = []string{s(n)} }) }, "database: regexRules[0] must be at most 256 characters"},
		{"sourceIp", 32, func(n int) error { return db(func(b *clouddb.DatabaseSpec) { b.SourceIPs = list(n, "10.0.0.0/8") }) }, "database: sourceIp may hold at most 32 elements"},
		{"queryPerformanceFactor", 64, func(n int) error { return db(func(b *clouddb.DatabaseSpec) { b.QueryPerformanceFactor = s(n) }) }, "database: queryPerformanceFactor must be at most 64 characters"},
		{"periodicBackupPath", 2048, func(n int) error {
			return db(func(b *clouddb.DatabaseSpec) { b.PeriodicBackupPath = "/" + s(n-1) })
		}, "database: periodicBackupPath must be at most 2048 characters"},
		{"update regexRules", 32, func(n int) error {
			rules := list(n, "a")
			d := &clouddb.Database{Spec: validDatabase()}
			return (&clouddb.DatabaseUpdate{RegexRules: &rules}).Apply(d)
		}, "database: regexRules may hold at most 32 elements"},
		{"import URI", 2048, func(n int) error {
			return (&clouddb.ImportRequest{SourceType: "http", ImportFromURI: []string{"http://h/" + strings.Repeat("a", n-9)}}).Validate()
		}, "import: importFromUri[0] must be at most 2048 characters"},
		{"cloud account name", 100, func(n int) error { return ca(func(b *clouddb.CloudAccountSpec) { v := s(n); b.Name = &v }) }, "cloud account: name must be at most 100 characters"},
		{"cloud account secret", 1024, func(n int) error { return ca(func(b *clouddb.CloudAccountSpec) { v := s(n); b.AccessSecretKey = &v }) }, "cloud account: accessSecretKey must be at most 1024 characters"},
		{"signInLoginUrl", 2048, func(n int) error {
			return ca(func(b *clouddb.CloudAccountSpec) { v := "https://h/" + s(n-10); b.SignInLoginURL = &v })
		}, "cloud account: signInLoginUrl must be at most 2048 characters"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, c.check(c.limit), "at the limit")
			err := c.check(c.limit + 1)
			e := clouddb.AsError(err)
			require.NotNil(t, e, "past the limit: %v", err)
			require.Equal(t, 400, e.Status)
			require.Contains(t, e.Description, c.want)
		})
	}
}

// TestNoControlCharacters: names, regions and tags refuse NUL, other control characters,
// bidi overrides and invisible format characters, and invalid UTF-8.
func TestNoControlCharacters(t *testing.T) {
	for _, bad := range []string{"a\x00b", "a\nb", "a\x1bb", "a\u202eb", "a\u2066b", "a\u200bb", "a\ufeffb", "a\xffb"} {
		checks := map[string]error{}
		spec := validSubscription()
		spec.Name = bad
		checks["subscription: name"] = spec.Validate()
		name := bad
		checks["subscription: name "] = (&clouddb.SubscriptionUpdate{Name: &name}).Validate()
		spec = validSubscription()
		spec.CloudProviders[0].Regions[0].Region = bad
		checks["subscription: cloudProviders[0].regions[0].region"] = spec.Validate()
		spec = validSubscription()
		spec.CloudProviders[0].ResourceTags = []clouddb.Tag{{Key: "k", Value: bad}}
		checks["subscription: cloudProviders[0].resourceTags[0].value"] = spec.Validate()
		checks["database: tags[0].key"] = clouddb.ValidateTags("database", "tags", []clouddb.Tag{{Key: bad}})
		checks["database: name"] = clouddb.ValidateDatabaseName(bad)
		c := validCloudAccount()
		c.Name = &name
		checks["cloud account: name"] = c.ValidateCreate()
		for field, err := range checks {
			e := clouddb.AsError(err)
			require.NotNil(t, e, "%s %q: %v", field, bad, err)
			require.Equal(t, 400, e.Status, "%s %q", field, bad)
			require.Contains(t, e.Description, strings.TrimSpace(field), "%q", bad)
		}
	}
	spec := validSubscription()
	spec.Name, spec.CloudProviders[0].Regions[0].Region = "Café – prod 東京", "ap-northeast-1"
	require.NoError(t, spec.Validate(), "printable characters of any script are fine")
}

// TestSignInLoginURL: only http and https URLs are taken; javascript:, data: and file:
// would run or open something in the browser that shows the link.
func TestSignInLoginURL(t *testing.T) {
	for _, bad := range []string{"javascript:alert(1)", "JAVASCRIPT:alert(1)", "data:text/html,x", "file:///etc/passwd", "https://", "console.example.com", "//evil.example.com"} {
		c := validCloudAccount()
		c.SignInLoginURL = &bad
		err := c.ValidateCreate()
		e := clouddb.AsError(err)
		require.NotNil(t, e, "%q: %v", bad, err)
		require.Equal(t, "cloud account: signInLoginUrl must be an http or https URL", e.Description, "%q", bad)
		update := clouddb.CloudAccountSpec{SignInLoginURL: &bad}
		require.Error(t, update.ValidateUpdate(), "%q on an update", bad)
	}
	for _, good := range []string{"https://123456789.signin.aws.amazon.com/console", "http://127.0.0.1:8080/login"} {
		c := validCloudAccount()
		c.SignInLoginURL = &good
		require.NoError(t, c.ValidateCreate(), good)
	}
}
