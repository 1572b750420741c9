package kubernetes

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// elect keeps the labelled primary while it serves, and otherwise never prefers a node
// with less data: a primary that came back empty as a replica loses to its replica.
func TestElect(t *testing.T) {
	for _, c := range []struct {
		name  string
		nodes []nodeState
		want  int
	}{
		{"the labelled master stays", []nodeState{{master: true, offset: 10}, {labelled: true, master: true, offset: 5}}, 1},
		{"a labelled primary back empty as a replica loses to its replica",
			[]nodeState{{labelled: true, offset: 0}, {offset: 900, keys: 200, masterHost: "10.0.0.1"}}, 1},
		{"a master unlabelled (replication turned on) over a new replica", []nodeState{{master: true, offset: 0, keys: 100}, {offset: 0}}, 0},
		{"a master over replicas that hold more", []nodeState{{offset: 50}, {master: true, offset: 10}}, 1},
		{"the most data, by offset", []nodeState{{offset: 10, keys: 50}, {offset: 20, keys: 40}}, 1},
		{"the most data, by keys on an equal offset", []nodeState{{offset: 0, keys: 1}, {offset: 0, keys: 3}}, 1},
		{"the labelled one on a tie", []nodeState{{offset: 7, keys: 3}, {labelled: true, offset: 7, keys: 3}}, 1},
		{"node 0 of a new database", []nodeState{{}, {}}, 0},
	} {
		if got := elect(c.nodes); got != c.want {
			t.Errorf("%s: elect = %d, want %d", c.name, got, c.want)
		}
	}
}

// orphanedReplica takes over only with a replica that holds its lost primary's data: one
// that followed a pod address no answering node has, and whose link was up once.
func TestOrphanedReplica(t *testing.T) {
	const serviceIP, lost, other = "10.96.0.10", "10.244.0.7", "10.244.0.8"
	pod := func(ip string) *corev1.Pod { return &corev1.Pod{Status: corev1.PodStatus{PodIP: ip}} }
	for _, c := range []struct {
		name   string
		states []nodeState
		want   bool
	}{
		{"a replica that synced from the lost primary", []nodeState{{}, {masterHost: lost, synced: true}}, true},
		{"a new replica whose first sync had not ended", []nodeState{{}, {masterHost: lost}}, false},
		{"a replica of the Service (started again)", []nodeState{{}, {masterHost: serviceIP, synced: true}}, false},
		{"a master answers", []nodeState{{}, {master: true}}, false},
	} {
		pods := []*corev1.Pod{nil, pod(other)}
		if _, got := orphanedReplica(pods, c.states, []int{0}, serviceIP); got != c.want {
			t.Errorf("%s: orphanedReplica = %v, want %v", c.name, got, c.want)
		}
	}
}
