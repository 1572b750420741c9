package kubernetes

import "testing"

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
