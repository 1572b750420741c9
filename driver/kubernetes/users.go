package kubernetes

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"clouddb"
	"clouddb/internal/redisconf"
)

var _ clouddb.UserSetter = (*Driver)(nil)

// SetUsers gives the database's named users (read-only while it follows sources) to the
// redis.conf of its Secret (each of them, see isConfigKey), which its next pod starts with,
// and to its running server if its pod is ready; nothing else changes (the rest of the
// redis.conf is kept as it is).
func (d *Driver) SetUsers(ctx context.Context, in clouddb.Instance) error {
	id := in.DatabaseID
	api := d.cfg.Client.CoreV1().Secrets(d.ns)
	var secret *corev1.Secret
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := api.Get(ctx, Name(id), metav1.GetOptions{})
		if err != nil {
			return err
		}
		changed := false
		for k, v := range s.Data {
			if !isConfigKey(k) {
				continue
			}
			if conf := withUsers(v, in); !bytes.Equal(conf, v) {
				s.Data[k], changed = conf, true
			}
		}
		if changed {
			if s, err = api.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		secret = s
		return nil
	})
	if apierrors.IsNotFound(err) {
		return nil // no server, nor anything it would start with
	}
	if err != nil {
		return fmt.Errorf("database %d: writing its users to its secret: %w", id, err)
	}
	// Every node (a primary and its replica, or a cluster's): a replica's users are those
	// its clients log in with after a failover.
	ports := []int{redisPort, redisPort}
	if in.OSSCluster {
		if ports, err = d.nodePorts(ctx, in); err != nil {
			return err
		}
	}
	for ordinal, port := range ports {
		if err = d.setNodeUsers(ctx, in, nodePodName(id, ordinal), port, secret); err != nil {
			return fmt.Errorf("database %d: %w", id, err)
		}
	}
	return nil
}

// setNodeUsers gives the named users to the server of the pod, if it serves.
func (d *Driver) setNodeUsers(ctx context.Context, in clouddb.Instance, name string, port int, secret *corev1.Secret) error {
	pod, err := d.cfg.Client.CoreV1().Pods(d.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !podStarted(pod) || pod.Status.PodIP == "" || pod.DeletionTimestamp != nil || port == 0 {
		// Not serving: it starts with the Secret's users, or runs out without clients.
		return nil
	}
	tc, err := d.podTLS(pod, secret)
	if err != nil {
		return err
	}
	c := clientAt(pod, port, string(secret.Data[keyInternal]), tc)
	defer c.Close()
	return setNamedUsers(ctx, c, in)
}

// withUsers is the redis.conf conf with the instance's named users instead of its own,
// after clouddb's user's line, every other line as it is.
func withUsers(conf []byte, in clouddb.Instance) []byte {
	// The starts of the user lines kept, the name quoted as appendLine does and ended by
	// the space before the rules (a user "default2" is not the default user).
	prefix := func(name string) []byte { l := appendLine(nil, "user", name); return append(l[:len(l)-1], ' ') }
	// And a cluster node's replication user (see cluster.go).
	defaultLine, internalLine, replLine := prefix("default"), prefix(redisconf.InternalUser), prefix(clusterReplUser)
	keep := func(l []byte) bool {
		return bytes.HasPrefix(l, defaultLine) || bytes.HasPrefix(l, internalLine) || bytes.HasPrefix(l, replLine)
	}
	var out []byte
	for _, l := range bytes.SplitAfter(conf, []byte("\n")) {
		if bytes.HasPrefix(l, []byte("user ")) && !keep(l) {
			continue
		}
		out = append(out, l...)
		if bytes.HasPrefix(l, internalLine) {
			for _, u := range in.Users {
				out = appendLine(out, "user", append([]string{u.Name}, redisconf.UserRules("#"+redisconf.PasswordHash(u.Password), u.Rule, readOnly(in))...)...)
			}
		}
	}
	return out
}

// aclFields are the fields of an ACL GETUSER reply by name, in RESP2 (a flat list) or
// RESP3 (a map); false for a reply of neither shape.
func aclFields(reply any) (map[string]any, bool) {
	out := map[string]any{}
	switch r := reply.(type) {
	case []any: // RESP2
		for i := 0; i+1 < len(r); i += 2 {
			out[fmt.Sprint(r[i])] = r[i+1]
		}
	case map[any]any: // RESP3
		for k, v := range r {
			out[fmt.Sprint(k)] = v
		}
	default:
		return nil, false
	}
	return out, true
}
