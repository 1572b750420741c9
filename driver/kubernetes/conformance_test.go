package kubernetes_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
	"clouddb/driver/kubernetes"
	"clouddb/drivertest"
)

// conformancePort hands each database of the conformance suite a NodePort of its own, in
// a part of the NodePort range (30000-32767) that the other tests of the package do not
// use: TestServe's --db-ports are 30100-30199, instance's from 31000.
var conformancePort atomic.Int32

func init() { conformancePort.Store(30200) }

// TestConformance runs the drivers' conformance suite on the Kubernetes driver. Each
// case's driver has a namespace of its own (made for it, deleted after it, not waited
// for), so that it holds no database at first and the cases run in parallel. The cases
// of the optional interfaces it does not implement skip.
func TestConformance(t *testing.T) {
	needCluster(t)
	t.Parallel()
	var namespaces sync.Map // *kubernetes.Driver → its namespace, for Reopen
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) clouddb.Driver {
			ns := conformanceNamespace(t)
			d := newDriver(t, cluster.client, ns)
			namespaces.Store(d, ns)
			t.Cleanup(func() { namespaces.Delete(d) })
			return d
		},
		Instance: func(t *testing.T, id int) clouddb.Instance {
			port := conformancePort.Add(1)
			if port > 30999 {
				t.Fatal("the conformance suite's NodePorts (30201-30999) ran out")
			}
			return clouddb.Instance{
				DatabaseID:      id,
				Port:            int(port),
				Password:        "s3cret-" + strconv.Itoa(id),
				MaxMemoryBytes:  64 << 20,
				EvictionPolicy:  "volatile-lru",
				DataPersistence: "none",
				Shards:          1,
			}
		},
		// Ensure returns once the NodePort routes to the database: it answers at once.
		Addr: func(t *testing.T, d clouddb.Driver, in clouddb.Instance) string {
			addr := d.(*kubernetes.Driver).PublicEndpoint(in.Port)
			if in.TLS != nil {
				waitRoutedTLS(t, addr)
			} else if err := answers(addr); err != nil {
				ns, _ := namespaces.Load(d)
				t.Fatalf("no redis server answers at %s: %v; the database's pods: %s", addr, err, podStates(ns.(string), in.DatabaseID))
			}
			return addr
		},
		// The server the endpoint routes to, killed as a crash would: the kubelet starts it
		// again in its pod at once (empty without persistence), as a replica.
		Kill: func(t *testing.T, d clouddb.Driver, in clouddb.Instance, addr string) {
			ns, ok := namespaces.Load(d)
			if !ok {
				t.Fatal("not a driver of this harness")
			}
			ctx := ctxFor(t, time.Minute)
			if in.OSSCluster {
				// A cluster node's address (as CLUSTER SLOTS announces it) is its own NodePort.
				killServer(t, ctx, ns.(string), nodeAt(t, ctx, d.(*kubernetes.Driver), ns.(string), in.DatabaseID, addr))
				return
			}
			if want := d.(*kubernetes.Driver).PublicEndpoint(in.Port); addr != want {
				t.Fatalf("Kill of %s: the database's only address is its endpoint %s", addr, want)
			}
			killServer(t, ctx, ns.(string), servingPod(t, ctx, ns.(string), in.DatabaseID))
		},
		Describe: func(d clouddb.Driver, id int) string {
			ns, ok := namespaces.Load(d)
			if !ok {
				return "a driver Reopen made: its namespace is its first driver's"
			}
			return podStates(ns.(string), id)
		},
		Reopen: func(t *testing.T, d clouddb.Driver) clouddb.Driver {
			ns, ok := namespaces.Load(d)
			if !ok {
				t.Fatal("not a driver of this harness")
			}
			return newDriver(t, cluster.client, ns.(string))
		},
		// Pods start in seconds; a persistent one waits for its claim too.
		Timeout:     3 * time.Minute,
		Parallel:    true,
		Persistence: true,
		// A new StatefulSet, the data moved over (see persistence.go).
		PersistenceChange: true,
		Replication:       true,
		TLS:               true,
		ReplicaOf:         true,
		CA:                testCA.CertificatePEM(),
		Cluster:           true,
	})
}

// nodeAt is the pod of a cluster database whose NodePort Service is at addr.
func nodeAt(t *testing.T, ctx context.Context, d *kubernetes.Driver, ns string, id int, addr string) string {
	t.Helper()
	svcs, err := cluster.client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelDatabase + "=" + strconv.Itoa(id)})
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range svcs.Items {
		if svc.Spec.Type == corev1.ServiceTypeNodePort && len(svc.Spec.Ports) == 1 && d.PublicEndpoint(int(svc.Spec.Ports[0].NodePort)) == addr {
			return svc.Spec.Selector["statefulset.kubernetes.io/pod-name"]
		}
	}
	t.Fatalf("no node of database %d is at %s", id, addr)
	return ""
}

// conformanceNamespace is a new namespace for one case, deleted when it ends (after the
// case's own cleanups, which remove its databases).
func conformanceNamespace(t *testing.T) string {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	c := cluster.client
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "clouddb-conf-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	// Pods need the namespace's default service account, which a controller makes.
	if err := poll(ctx, 30*time.Second, func() (bool, error) {
		_, err := c.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("namespace %s has no default service account: %v", ns.Name, err)
	}
	return ns.Name
}

// answers reports whether a redis server answers at addr: any answer to an
// unauthenticated PING (NOAUTH included) is a server.
func answers(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err = conn.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	if _, err = conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line == "" || (line[0] != '+' && line[0] != '-') {
		return errors.New("not a redis reply: " + strconv.Quote(line))
	}
	return nil
}

// podStates describes the database's pods (started, ready, restarts, phase) and the
// last events of each (a failed probe, a kill), for a failure's message.
func podStates(ns string, id int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := cluster.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelDatabase + "=" + strconv.Itoa(id)})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, fmt.Sprintf("%s %s started=%v ready=%v restarts=%d ip=%s", p.Name, p.Status.Phase, started(&p), ready(&p), restarts(&p), p.Status.PodIP))
		events, err := cluster.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name})
		if err != nil {
			continue
		}
		for _, e := range events.Items[max(0, len(events.Items)-5):] {
			out = append(out, fmt.Sprintf("  %s %s ×%d: %s", e.LastTimestamp.Format(time.TimeOnly), e.Reason, e.Count, e.Message))
		}
	}
	return strings.Join(out, "; ")
}
