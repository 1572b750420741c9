package kubernetes

import (
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"clouddb"
)

// TestCheckUpgrade: an upgrade is refused before it is accepted only for a cluster that
// could not restart on the new image with its data (no replicas, no persistence).
func TestCheckUpgrade(t *testing.T) {
	d, err := New(Config{Client: fake.NewClientset(), Namespace: "ns", Images: map[string]string{"7.0": "a", "7.2": "b"}, DefaultVersion: "7.0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name                      string
		cluster, replicated, keep bool
		refused                   bool
	}{
		{"one node", false, false, false, false},
		{"replicated", false, true, false, false},
		{"cluster", true, false, false, true},
		{"replicated cluster", true, true, false, false},
		{"persistent cluster", true, false, true, false},
	} {
		in := clouddb.Instance{DatabaseID: 1, OSSCluster: c.cluster, Replication: c.replicated, DataPersistence: "none", Shards: 1}
		if c.keep {
			in.DataPersistence = "aof-every-1-second"
		}
		if err := d.CheckUpgrade(in, "7.2"); (err != nil) != c.refused {
			t.Errorf("%s: CheckUpgrade = %v, want refused %v", c.name, err, c.refused)
		}
	}
}
