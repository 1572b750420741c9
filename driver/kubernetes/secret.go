package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
)

// applySecret creates or updates the database's Secret: its redis.conf (see addConfigs), the tenant's
// password and clouddb's own, which is made once and then kept, and the primary a
// starting node replicates (see primaryKeys: the Service's, while sts runs two nodes or
// the instance wants them).
func (d *Driver) applySecret(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet) (*corev1.Secret, error) {
	return d.applySecretWith(ctx, in, sts, nil)
}

// applySecretWith is applySecret with extra keys (a cluster's nodes' own config files).
func (d *Driver) applySecretWith(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet, extra map[string][]byte) (*corev1.Secret, error) {
	api := d.cfg.Client.CoreV1().Secrets(d.ns)
	s, err := api.Get(ctx, Name(in.DatabaseID), metav1.GetOptions{})
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("database %d: reading its secret: %w", in.DatabaseID, err)
	}
	internal := ""
	if found {
		internal = string(s.Data[keyInternal])
	} else {
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: Name(in.DatabaseID), Namespace: d.ns}}
	}
	if internal == "" {
		if internal, err = newSecret(); err != nil {
			return nil, err
		}
	}
	data := map[string][]byte{keyPassword: []byte(in.Password), keyInternal: []byte(internal)}
	var old map[string][]byte
	if found {
		old = s.Data
	}
	if err = d.addTLSData(ctx, in, old, data); err != nil {
		return nil, err
	}
	if err = d.addConfigs(ctx, in, sts, internal, data); err != nil {
		return nil, err
	}
	// A cluster node's replication is the cluster's (redis refuses replicaof there).
	primary, err := primaryKeys(false, nil)
	if !in.OSSCluster {
		primary, err = d.primaryKeysOf(ctx, in, sts)
	}
	if err != nil {
		return nil, err
	}
	maps.Copy(data, primary)
	maps.Copy(data, extra)
	if found && maps.EqualFunc(s.Data, data, func(a, b []byte) bool { return string(a) == string(b) }) &&
		maps.Equal(s.Labels, labels(in.DatabaseID)) && len(s.OwnerReferences) == 1 && s.OwnerReferences[0].UID == sts.UID {
		return s, nil
	}
	s.Labels, s.OwnerReferences, s.Data, s.Type = labels(in.DatabaseID), ownedBy(sts), data, corev1.SecretTypeOpaque
	if found {
		s, err = api.Update(ctx, s, metav1.UpdateOptions{})
	} else {
		s, err = api.Create(ctx, s, metav1.CreateOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("database %d: writing its secret: %w", in.DatabaseID, err)
	}
	return s, nil
}

func newSecret() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// addConfigs puts into data the redis.conf of every pod that may start: the instance's
// next pod, and the pods of sts's template and the running ones, each under the key it
// reads and naming the TLS files it mounts (see isConfigKey, keyLiveConfig). The keys no pod
// reads any more are left out, so they go.
func (d *Driver) addConfigs(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet, internal string, data map[string][]byte) error {
	if in.OSSCluster && in.TLS != nil {
		// One redis.conf, whose files every pod mounts (see cluster_tls.go).
		return addClusterTLSConfig(in, internal, data)
	}
	if _, _, err := podConfig(in, internal, data); err != nil {
		return err
	}
	readers := []configMount{nextMount(in)}
	if m, ok := podMount(&sts.Spec.Template.Spec); ok {
		readers = append(readers, m)
	}
	pods, err := d.podsOf(ctx, in.DatabaseID)
	if err != nil {
		return err
	}
	for i := range pods {
		if m, ok := podMount(&pods[i].Spec); ok {
			readers = append(readers, m)
		}
	}
	// The running pods last: a key read by a running pod and the next one alike (made by
	// a driver of one key for all) holds what the running pod can start with.
	for _, m := range readers {
		key, conf, err := mountedConfig(in, internal, m, data)
		if err != nil {
			return err
		}
		if key == "" {
			continue
		}
		if m.whole {
			addLiveTLSFiles(data)
		}
		data[key] = conf
	}
	return nil
}
