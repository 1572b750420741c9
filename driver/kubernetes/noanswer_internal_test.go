package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"clouddb"
)

// TestNoAnswer: only the silence of a node's server counts as no answer (its primary is
// then taken for hung): not what it answered (BUSY, LOADING), a refused connection, nor
// an error or timeout of the Kubernetes API (no server was dialled).
func TestNoAnswer(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"a read that timed out", fmt.Errorf("database 1: pod p: %w", &serverError{timeout}), true},
		{"a reply (CROSSSLOT; BUSY alike)", &serverError{redis.ErrCrossSlot}, false},
		{"LOADING", &serverError{fmt.Errorf("%w: LOADING", clouddb.ErrServerStarting)}, false},
		{"refused", &serverError{&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}, false},
		{"the API's timeout", fmt.Errorf("pod p: %w", timeout), false},
		{"the API's deadline", context.DeadlineExceeded, false},
		{"none", nil, false},
	} {
		if got := noAnswer(c.err); got != c.want {
			t.Errorf("%s: noAnswer(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestNoAnswerOfTheAPI: readClusterNode's error when the Kubernetes API server, not the
// node's server, times out (a slow or restarting control plane) is not the server's
// silence: lostNode would otherwise take a healthy primary for hung.
func TestNoAnswerOfTheAPI(t *testing.T) {
	for _, tc := range []struct {
		name string
		get  k8stesting.ReactionFunc
	}{
		{"GET times out", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, &url.Error{Op: "Get", URL: "https://apiserver:6443/api/v1/namespaces/ns/pods/clouddb-db-1-0", Err: os.ErrDeadlineExceeded}
		}},
		{"GET hangs", func(k8stesting.Action) (bool, runtime.Object, error) {
			time.Sleep(1500 * time.Millisecond)
			return true, nil, context.DeadlineExceeded
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			cs.PrependReactor("get", "pods", tc.get)
			d, err := New(Config{Client: cs, Namespace: "ns", Images: map[string]string{"7.0": "a"}, DefaultVersion: "7.0", StartTimeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			secret := &corev1.Secret{Data: map[string][]byte{keyInternal: []byte("x")}}
			_, err = d.readClusterNode(context.Background(), 1, 0, 30000, secret, time.Second)
			if err == nil || noAnswer(err) {
				t.Errorf("readClusterNode = %v; noAnswer %v, want an error that is not the server's silence", err, noAnswer(err))
			}
		})
	}
}
