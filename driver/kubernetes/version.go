package kubernetes

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"clouddb"
)

// Redis versions. A database runs the image of its version (Config.Images); a running
// pod cannot change its image, so a pod of another image than its StatefulSet's template
// (an upgrade, or the operator's new image of the same version) is replaced as for TLS
// turned on or off: a one-node database's with its data saved and loaded into the new
// pod (see settle), a replicated database's one node at a time, the replica first, which
// syncs from the primary of the old version, then the primary after it handed over (see
// renewNodes). Until then Running is false, so the reconciler's Ensure rolls them. A
// cluster's nodes are not replaced for their image: they take a new image of the same
// version at their next restart, and a change of version is refused. Nor is a pod's data
// ever given to an older version than the one that wrote it (checkVersion).

// podImage is the image of the pod's server.
func podImage(spec *corev1.PodSpec) string {
	for _, c := range spec.Containers {
		if c.Name == "redis" {
			return c.Image
		}
	}
	return ""
}

// templateImage is the image the StatefulSet's pods are made with.
func templateImage(sts *appsv1.StatefulSet) string { return podImage(&sts.Spec.Template.Spec) }

// versionOf is the Redis version (major.minor) of an image the driver offers, "" for
// another (one an earlier configuration offered).
func (d *Driver) versionOf(image string) string {
	for v, img := range d.cfg.Images {
		if img == image {
			return v
		}
	}
	return ""
}

// checkVersion refuses to run the instance on its image (img, of its version) while a
// pod of the database runs a newer version (its data may not load in an older one), and
// a cluster's change of version.
func (d *Driver) checkVersion(ctx context.Context, in clouddb.Instance, img string) error {
	want := d.versionOf(img)
	pods, err := d.podsOf(ctx, in.DatabaseID)
	if err != nil {
		return err
	}
	for i := range pods {
		have := d.versionOf(podImage(&pods[i].Spec))
		switch {
		case have == "" || have == want:
		case clouddb.CompareRedisVersions(have, want) > 0:
			return fmt.Errorf("database %d: pod %s runs Redis %s, newer than %s: its data would be given to an older server: %w",
				in.DatabaseID, pods[i].Name, have, want, ErrNotSupported)
		case in.OSSCluster:
			return fmt.Errorf("database %d: changing the Redis version of a cluster (%s to %s): %w", in.DatabaseID, have, want, ErrNotSupported)
		}
	}
	return nil
}
