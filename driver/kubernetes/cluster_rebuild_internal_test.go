package kubernetes

import (
	"log/slog"
	"slices"
	"strings"
	"testing"

	"clouddb"
	"clouddb/internal/pki"
	"clouddb/internal/redisconf"
)

// TestPersistenceOf: the persistence a cluster ran with before a rebuild is told from
// the config file clouddb wrote for it, for every persistent kind; none and a file of
// no kind of clouddb's are not one.
func TestPersistenceOf(t *testing.T) {
	for name := range redisconf.Persistences {
		in := clouddb.Instance{DatabaseID: 1, MaxMemoryBytes: 100 << 20, EvictionPolicy: "noeviction", DataPersistence: name, Shards: 1}
		conf, err := renderConfig(in, "internal")
		if err != nil {
			t.Fatal(err)
		}
		want := name
		if name == "none" {
			want = ""
		}
		if got := persistenceOf(conf); got != want {
			t.Errorf("persistenceOf(the config of %s) = %q, want %q", name, got, want)
		}
	}
	if got := persistenceOf([]byte("appendonly yes\n")); got != "" {
		t.Errorf("persistenceOf(a partial config) = %q, want none", got)
	}
}

// TestTenantCertificates: the tenant's client certificates of a TLS cluster are read
// back from its CA bundle, without the CA's own (clouddb's client certificates).
func TestTenantCertificates(t *testing.T) {
	ca, err := pki.New("test CA")
	if err != nil {
		t.Fatal(err)
	}
	d := &Driver{cfg: Config{CA: ca}, ns: "ns", log: slog.New(slog.DiscardHandler)}
	var certs []string
	for _, name := range []string{"a", "b"} {
		c, _, err := ca.IssueClient(name)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, string(c))
	}
	for _, tc := range [][]string{nil, certs[:1], certs} {
		in := clouddb.Instance{TLS: &clouddb.InstanceTLS{ClientCertificates: tc}}
		got := d.tenantCertificates(d.caBundle(in))
		trim := func(s []string) []string {
			out := make([]string, len(s))
			for i := range s {
				out[i] = strings.TrimSpace(s[i])
			}
			return out
		}
		if !slices.Equal(trim(got), trim(tc)) {
			t.Errorf("tenantCertificates of a bundle of %d certificates = %d: %q", len(tc), len(got), got)
		}
	}
}
