package kubernetes_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
	"clouddb/driver/kubernetes"
)

// checkerSelector picks the pods and StatefulSets that check ACL rules.
const checkerSelector = kubernetes.LabelManagedBy + "=" + kubernetes.ManagedBy + ",clouddb.io/acl-check"

// checkers are the names of the checkers' StatefulSets in ns and their pods.
func checkers(t *testing.T, ctx context.Context, ns string) ([]string, []corev1.Pod) {
	t.Helper()
	opts := metav1.ListOptions{LabelSelector: checkerSelector}
	sts, err := cluster.client.AppsV1().StatefulSets(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range sts.Items {
		names = append(names, s.Name)
	}
	pods, err := cluster.client.CoreV1().Pods(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	return names, pods.Items
}

// oneChecker is the one checker pod of ns (one image), ready.
func oneChecker(t *testing.T, ctx context.Context, ns string) *corev1.Pod {
	t.Helper()
	names, pods := checkers(t, ctx, ns)
	if len(names) != 1 || len(pods) != 1 || !started(&pods[0]) {
		t.Fatalf("checkers %v, %d pods: want one, its server up", names, len(pods))
	}
	return &pods[0]
}

// TestCheckACLRules: rules are checked on a pod of the driver's image, as users get them
// (a rule the server refuses is refused as the API reports it, naming the oldest version
// of the image when several are offered), one pod for the versions that share an image.
// The pod is reused by later and concurrent checks, never listed by Instances, runs as
// a database's does, and is deleted ACLCheckIdle after the last check; a restarted
// clouddb (another Driver, which cannot know the old pod's password) replaces it.
func TestCheckACLRules(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 5*time.Minute)
	ns := conformanceNamespace(t)
	newChecker := func(idle time.Duration) *kubernetes.Driver {
		d, err := kubernetes.New(kubernetes.Config{
			Client: cluster.client, Namespace: ns, DefaultVersion: redisVersion,
			Images:          map[string]string{redisVersion: redisImage, "7.2": redisImage},
			ImagePullPolicy: corev1.PullNever, StartTimeout: 90 * time.Second, NodeAddress: nodeIP,
			ACLCheckIdle: idle,
		})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	const idle = 8 * time.Second
	d := newChecker(idle)
	var _ clouddb.ACLChecker = d
	good := []string{"+@read ~*", "+@all -@dangerous ~* resetchannels &news", "+get %R~cache:* -@write"}
	start := time.Now()
	if err := d.CheckACLRules(ctx, good); err != nil {
		t.Fatalf("CheckACLRules of good rules: %v", err)
	}
	t.Logf("first check (the pod started): %v", time.Since(start))
	pod := oneChecker(t, ctx, ns)
	c := pod.Spec.Containers[0]
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 {
		t.Errorf("the checker's security context is %+v, want a database's", sc)
	}
	if c.Resources.Limits.Memory().IsZero() || c.Image != redisImage {
		t.Errorf("the checker's container: image %s, limits %v", c.Image, c.Resources.Limits)
	}
	if strings.Contains(strings.Join(c.Command, " "), ">") {
		t.Errorf("the checker's command holds a password: %q", c.Command)
	}
	if _, ok := pod.Labels[kubernetes.LabelDatabase]; ok {
		t.Errorf("the checker has a database's label: %v", pod.Labels)
	}
	if ids := instances(t, ctx, d); len(ids) != 0 {
		t.Fatalf("Instances with a checker = %v, want none", ids)
	}

	// Refused by the server, as the API reports it; the verdicts of the good rules are
	// remembered, the new ones asked on the same pod.
	for rule, word := range map[string]string{"+nosuchcommand ~*": "+nosuchcommand", "+@read ~* -@nonsense": "-@nonsense"} {
		start = time.Now()
		err := d.CheckACLRules(ctx, append([]string{"+hget ~h:*"}, append(good, rule, "+nosuch2 ~*")...))
		t.Logf("check on the warm pod: %v", time.Since(start))
		e := clouddb.AsError(err)
		if e == nil || e.Type != clouddb.ErrTypeACLRulePatternInvalid {
			t.Fatalf("CheckACLRules with %q = %v, want the API's refusal", rule, err)
		}
		text, reason, ok := clouddb.ACLRuleRefusal(err)
		want := fmt.Sprintf("Redis %s refuses %q: Unknown command or category name in ACL", redisVersion, word)
		if !ok || text != rule || reason != want {
			t.Fatalf("refusal %q, %q, %v; want %q, %q", text, reason, ok, rule, want)
		}
	}
	// Concurrent checks share the one pod.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = d.CheckACLRules(ctx, []string{fmt.Sprintf("+get ~concurrent:%d", i)}) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("concurrent CheckACLRules: %v", err)
		}
	}
	if again := oneChecker(t, ctx, ns); again.UID != pod.UID || restarts(again) != 0 {
		t.Fatalf("checker pod %s (%s, %d restarts), want %s reused", again.Name, again.UID, restarts(again), pod.UID)
	}

	// Gone after ACLCheckIdle.
	if err := poll(ctx, idle+time.Minute, func() (bool, error) {
		names, pods := checkers(t, ctx, ns)
		return len(names) == 0 && len(pods) == 0, nil
	}); err != nil {
		names, pods := checkers(t, ctx, ns)
		t.Fatalf("checkers left %v after ACLCheckIdle (%d pods): %v", names, len(pods), err)
	}

	// A restarted clouddb makes its own, and the next one replaces it.
	first := newChecker(0)
	if err := first.CheckACLRules(ctx, []string{"+set ~restart:1"}); err != nil {
		t.Fatal(err)
	}
	pod = oneChecker(t, ctx, ns)
	if err := newChecker(0).CheckACLRules(ctx, []string{"+set ~restart:2"}); err != nil {
		t.Fatalf("CheckACLRules of a restarted clouddb, with a checker made before: %v", err)
	}
	var after *corev1.Pod
	if err := poll(ctx, time.Minute, func() (bool, error) {
		names, pods := checkers(t, ctx, ns)
		if len(names) == 1 && len(pods) == 1 {
			after = &pods[0]
		}
		return after != nil, nil
	}); err != nil {
		t.Fatalf("the replaced checker's pod stays: %v", err)
	}
	if after.UID == pod.UID {
		t.Fatal("the checker of another Driver was used")
	}
}

// TestCheckACLRulesCannotStart: when the checker cannot run (its image is missing), the
// check fails with the pod's reason, is no refusal, and leaves nothing behind.
func TestCheckACLRulesCannotStart(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 3*time.Minute)
	ns := conformanceNamespace(t)
	d, err := kubernetes.New(kubernetes.Config{
		Client: cluster.client, Namespace: ns, DefaultVersion: redisVersion,
		Images:          map[string]string{redisVersion: "localhost/clouddb-no-such-image:1"},
		ImagePullPolicy: corev1.PullNever, StartTimeout: 60 * time.Second, NodeAddress: nodeIP,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = d.CheckACLRules(ctx, []string{"+get ~*"})
	if err == nil || !strings.Contains(err.Error(), "ErrImageNeverPull") {
		t.Fatalf("CheckACLRules with an image that is not there = %v, want the pod's reason ErrImageNeverPull", err)
	}
	if _, _, refused := clouddb.ACLRuleRefusal(err); refused || clouddb.AsError(err) != nil {
		t.Fatalf("CheckACLRules = %v: a check not made is no refusal", err)
	}
	if err := poll(ctx, time.Minute, func() (bool, error) {
		names, pods := checkers(t, ctx, ns)
		return len(names) == 0 && len(pods) == 0, nil
	}); err != nil {
		names, pods := checkers(t, ctx, ns)
		t.Fatalf("a checker that cannot run is left: %v (%d pods): %v", names, len(pods), err)
	}
}
