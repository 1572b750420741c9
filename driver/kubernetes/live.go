package kubernetes

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
	"clouddb/internal/redisconf"
)

// applyLive brings the running server in line: its container's memory limit (resized in
// place before a larger maxmemory, so that the server never has more than its
// container), its settings and its users.
func (d *Driver) applyLive(ctx context.Context, in clouddb.Instance, pod *corev1.Pod, internal string, tc *tls.Config, oldLimit int64) error {
	c := client(pod, internal, tc)
	defer c.Close()
	return d.applyLiveTo(ctx, in, pod, c, oldLimit)
}

// applyLiveTo is applyLive through c, a connection to the pod's server.
func (d *Driver) applyLiveTo(ctx context.Context, in clouddb.Instance, pod *corev1.Pod, c *redis.Client, oldLimit int64) error {
	if err := ping(ctx, c); err != nil {
		return fmt.Errorf("PING: %w", err)
	}
	limit := memoryLimit(in.MaxMemoryBytes)
	have := podMemory(pod)
	if have != 0 && limit > have {
		if err := d.resize(ctx, pod, limit); err != nil {
			return err
		}
	}
	for _, s := range liveSettings(in) {
		if err := c.ConfigSet(ctx, s[0], s[1]).Err(); err != nil {
			return fmt.Errorf("CONFIG SET %s: %w", s[0], err)
		}
	}
	// A smaller size leaves the running container its larger limit: Kubernetes 1.33
	// lowers a memory limit in place only by restarting the container, which would lose
	// a database's data that does not persist. The pod's next start takes the template's.
	if oldLimit != limit {
		d.log.Info("changed the memory of a database", "database_id", in.DatabaseID, "maxmemory", in.MaxMemoryBytes,
			"container_limit", limit, "running_container_limit", max(have, limit))
	}
	return d.applyUsers(ctx, c, in)
}

// podMemory is the memory limit the pod's redis container runs with now.
func podMemory(pod *corev1.Pod) int64 {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Resources != nil {
			if q, ok := cs.Resources.Limits[corev1.ResourceMemory]; ok {
				return q.Value()
			}
		}
	}
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			return q.Value()
		}
	}
	return 0
}

// resize changes the running container's memory (request and limit) in place, through
// the pod's resize subresource, and waits until the kubelet has applied it.
func (d *Driver) resize(ctx context.Context, pod *corev1.Pod, limit int64) error {
	q := resource.NewQuantity(limit, resource.BinarySI).String()
	patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"redis","resources":{"requests":{"memory":%q},"limits":{"memory":%q}}}]}}`, q, q)
	api := d.cfg.Client.CoreV1().Pods(d.ns)
	if _, err := api.Patch(ctx, pod.Name, "application/strategic-merge-patch+json", []byte(patch), metav1.PatchOptions{}, "resize"); err != nil {
		return fmt.Errorf("resizing pod %s to %s: %w", pod.Name, q, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		p, err := api.Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil {
			if podMemory(p) == limit {
				return nil
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodResizePending && c.Reason == corev1.PodReasonInfeasible {
					return fmt.Errorf("resizing pod %s to %s: infeasible: %s", pod.Name, q, c.Message)
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("resizing pod %s to %s: not applied: %w", pod.Name, q, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// applyUsers gives the live server the instance's default user and named users, and
// deletes any other user but clouddb's own.
func (d *Driver) applyUsers(ctx context.Context, c *redis.Client, in clouddb.Instance) error {
	set := func(name string, rules []string) error {
		args := []any{"acl", "setuser", name}
		for _, r := range rules {
			args = append(args, r)
		}
		return c.Do(ctx, args...).Err()
	}
	if err := set("default", redisconf.DefaultUser("#"+redisconf.PasswordHash(in.Password), readOnly(in), in.DefaultUserOff)); err != nil {
		return fmt.Errorf("ACL SETUSER default: %w", err)
	}
	return setNamedUsers(ctx, c, in)
}

// setNamedUsers gives the live server the instance's named users and deletes any other
// user but the default user and clouddb's own.
func setNamedUsers(ctx context.Context, c *redis.Client, in clouddb.Instance) error {
	set := func(name string, rules []string) error {
		args := []any{"acl", "setuser", name}
		for _, r := range rules {
			args = append(args, r)
		}
		return c.Do(ctx, args...).Err()
	}
	want := map[string]bool{"default": true, redisconf.InternalUser: true, clusterReplUser: in.OSSCluster}
	for _, u := range in.Users {
		want[u.Name] = true
		if err := set(u.Name, redisconf.UserRules("#"+redisconf.PasswordHash(u.Password), u.Rule, readOnly(in))); err != nil {
			return fmt.Errorf("ACL SETUSER %s: %w", u.Name, err)
		}
	}
	names, err := c.Do(ctx, "acl", "users").StringSlice()
	if err != nil {
		return fmt.Errorf("ACL USERS: %w", err)
	}
	for _, n := range names {
		if !want[n] {
			if err := c.Do(ctx, "acl", "deluser", n).Err(); err != nil {
				return fmt.Errorf("ACL DELUSER %s: %w", n, err)
			}
		}
	}
	return nil
}

// Running reports whether the database's pod is Ready, has the memory the instance's
// size needs and answers an authenticated PING; with replication, whether both pods do
// and play their parts (see runningNodes). A pod that cannot run is an error that says
// why.
func (d *Driver) Running(ctx context.Context, in clouddb.Instance) (bool, error) {
	sts, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).Get(ctx, Name(in.DatabaseID), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	if in.OSSCluster {
		return d.runningCluster(ctx, in, sts)
	}
	if d.serviceType() == corev1.ServiceTypeLoadBalancer {
		// Its load balancer's address as it is now (a new one must be in its certificate,
		// see secretTLSUsable, and is its publicEndpoint).
		svcs, lerr := d.databaseServices(ctx, in.DatabaseID)
		if lerr != nil {
			return false, lerr
		}
		d.rememberIngress(in.DatabaseID, svcs)
	}
	// The pods run the image of the instance's version (Ensure replaces them, see
	// version.go); an image the driver has not is Ensure's to report.
	img, err := d.image(in)
	if err != nil || sts.Spec.Replicas == nil || *sts.Spec.Replicas != nodeCount(in) || containerMemory(sts) != memoryLimit(in.MaxMemoryBytes) {
		return false, nil
	}
	if in.Replication {
		return d.runningNodes(ctx, in, img)
	}
	pod, err := d.servingPod(ctx, in.DatabaseID, 0, in.MaxMemoryBytes)
	if pod == nil || err != nil || podImage(&pod.Spec) != img {
		return false, err
	}
	// Its data where the instance's persistence keeps it, and no other pod served beside
	// it (a replica that a turning off of replication left, see dropReplicaPod).
	if hasClaim(sts) != persistent(in) || hasVolumeClaim(pod) != persistent(in) {
		return false, nil
	}
	if sts.Status.Replicas > 1 {
		if _, gerr := d.cfg.Client.CoreV1().Pods(d.ns).Get(ctx, nodePodName(in.DatabaseID, 1), metav1.GetOptions{}); !apierrors.IsNotFound(gerr) {
			return false, ignoreNotFound(gerr)
		}
	}
	secret, err := d.cfg.Client.CoreV1().Secrets(d.ns).Get(ctx, Name(in.DatabaseID), metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("database %d: reading its secret: %w", in.DatabaseID, err)
	}
	internal := string(secret.Data[keyInternal])
	// The configuration the pod starts with is the instance's: its settings, password and
	// users (Ensure writes it first).
	if !configAsAsked(in, internal, secret.Data) || in.TLS != nil && !d.secretTLSUsable(ctx, in, secret) {
		return false, nil
	}
	// And it starts on its own (REPLICAOF NO ONE), as the primary of no replica.
	if string(secret.Data[keyPrimaryHost]) != "no" {
		return false, nil
	}
	// The pod serves TLS as asked (checked below: with the files of the Secret), and no
	// load is pending.
	if pod.Annotations[annotationTLS] != tlsAnnotation(in) || secret.Annotations[annotationPendingLoad] != "" {
		return false, nil
	}
	tc, err := d.podTLS(pod, secret)
	if err != nil {
		return false, fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	c := client(pod, internal, tc)
	defer c.Close()
	if err = ping(ctx, c); err != nil {
		d.log.Warn("a database's pod is ready but does not answer PING", "database_id", in.DatabaseID, "error", err)
		return false, nil
	}
	if !d.following(ctx, in, pod, secret) {
		return false, nil
	}
	if ok, terr := d.tlsFilesServed(ctx, c, in, secret); !ok || terr != nil {
		return false, terr
	}
	// And the live server runs with them: Ensure applies them after it wrote them.
	ok, err := liveAsAsked(ctx, c, in)
	if err != nil {
		d.log.Warn("a database's pod is ready but its settings and users cannot be read", "database_id", in.DatabaseID, "error", err)
		return false, nil
	}
	return ok, nil
}

// liveAsAsked reports whether the live server has the instance's memory limit, policy and
// persistence, takes writes, its default user's password (on or off as asked) and exactly its named
// users, each with its password.
func liveAsAsked(ctx context.Context, c *redis.Client, in clouddb.Instance) (bool, error) {
	p := redisconf.Persistences[in.DataPersistence]
	want := map[string]string{
		"maxmemory":        strconv.FormatInt(in.MaxMemoryBytes, 10),
		"maxmemory-policy": in.EvictionPolicy,
		"appendonly":       p.Appendonly,
		"appendfsync":      p.Appendfsync,
		// Writes open (see fenceWrites; a cluster's once its shard is decided).
		"min-replicas-to-write": "0",
	}
	for name, v := range want {
		got, err := c.ConfigGet(ctx, name).Result()
		if err != nil {
			return false, fmt.Errorf("CONFIG GET %s: %w", name, err)
		}
		if got[name] != v {
			return false, nil
		}
	}
	names, err := c.Do(ctx, "acl", "users").StringSlice()
	if err != nil {
		return false, fmt.Errorf("ACL USERS: %w", err)
	}
	users := map[string]string{"default": in.Password}
	for _, u := range in.Users {
		users[u.Name] = u.Password
	}
	slices.Sort(names)
	wantNames := append(slices.Collect(maps.Keys(users)), redisconf.InternalUser)
	if in.OSSCluster {
		wantNames = append(wantNames, clusterReplUser)
	}
	slices.Sort(wantNames)
	if !slices.Equal(names, wantNames) {
		return false, nil
	}
	for name, password := range users {
		reply, err := c.Do(ctx, "acl", "getuser", name).Result()
		if err != nil {
			return false, fmt.Errorf("ACL GETUSER %s: %w", name, err)
		}
		fields, ok := aclFields(reply)
		if !ok {
			return false, fmt.Errorf("ACL GETUSER %s: unexpected reply %T", name, reply)
		}
		flags, _ := fields["flags"].([]any)
		hashes, _ := fields["passwords"].([]any)
		on := slices.ContainsFunc(flags, func(f any) bool { return fmt.Sprint(f) == "on" })
		if on != (name != "default" || !in.DefaultUserOff) {
			return false, nil
		}
		if len(hashes) != 1 || fmt.Sprint(hashes[0]) != redisconf.PasswordHash(password) {
			return false, nil
		}
	}
	return true, nil
}
