package kubernetes

import (
	"context"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"clouddb"
)

// statefulSet is the StatefulSet the instance wants, with its number of nodes as Replicas.
func (d *Driver) statefulSet(in clouddb.Instance, img string) *appsv1.StatefulSet {
	id := in.DatabaseID
	limit := resource.NewQuantity(memoryLimit(in.MaxMemoryBytes), resource.BinarySI)
	res := corev1.ResourceList{corev1.ResourceMemory: *limit}
	c := corev1.Container{
		Name:            "redis",
		Image:           img,
		ImagePullPolicy: d.cfg.ImagePullPolicy,
		Command:         serverCommand(confFile),
		Env:             append(primaryEnv(in.DatabaseID), probeEnv(in.DatabaseID)),
		Ports:           []corev1.ContainerPort{{Name: "redis", ContainerPort: redisPort}},
		Resources:       corev1.ResourceRequirements{Requests: res, Limits: res},
		// A size change resizes the running container (see applyLive), not restart it.
		ResizePolicy: []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.NotRequired}},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "config", MountPath: confDir, ReadOnly: true},
			{Name: "data", MountPath: dataDir},
			{Name: "run", MountPath: socketDir},
		},
		SecurityContext: d.securityContext(),
		// A server that exits at start says why in its last log lines (a bad setting, a
		// data directory it cannot write): Running and Ensure report them.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		// Started once it listens, Ready once it holds the data (see probe.go).
		StartupProbe:   startupProbe(redisPort),
		ReadinessProbe: readinessProbe(),
	}
	volumes := []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: Name(id), Items: []corev1.KeyToPath{{Key: keyConfig, Path: confFile}}, DefaultMode: ptr(int32(0o440)),
		}}},
		// The readiness probe's socket (the root filesystem is read-only).
		{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(1<<20, resource.BinarySI),
		}}},
	}
	var claims []corev1.PersistentVolumeClaim
	if persistent(in) {
		claim := corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: labels(id)},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceStorage: *resource.NewQuantity(max(minVolumeSize, 2*in.MaxMemoryBytes), resource.BinarySI),
				}},
			},
		}
		if d.cfg.StorageClass != "" {
			claim.Spec.StorageClassName = ptr(d.cfg.StorageClass)
		}
		claims = append(claims, claim)
	} else {
		// The data lives as long as the pod, as a server's memory does.
		volumes = append(volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: Name(id), Namespace: d.ns, Labels: labels(id)},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr(nodeCount(in)),
			ServiceName: Name(id),
			Selector:    &metav1.LabelSelector{MatchLabels: selector(id)},
			// The nodes start, stop and come back each on its own. In order (the default),
			// a node would wait for the one before it to be Ready, which a replicated
			// database's first node is only once Ensure made it the primary, with its
			// replica there (see probe.go); and a node whose pod cannot run would hold
			// back every node after it.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			// OnDelete: a changed template (a new size) never restarts the server, which may
			// hold the only copy of the data; Ensure resizes the running pod in place.
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			// The claim goes with the StatefulSet (Remove), and stays when scaled to zero (Stop).
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			VolumeClaimTemplates: claims,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(id)},
				Spec: corev1.PodSpec{
					Containers:                    []corev1.Container{c},
					Affinity:                      spreadPods(in),
					SecurityContext:               d.podSecurityContext(),
					Volumes:                       volumes,
					AutomountServiceAccountToken:  ptr(false),
					EnableServiceLinks:            ptr(false),
					TerminationGracePeriodSeconds: ptr(int64(60)),
				},
			},
		},
	}
}

// securityContext is a redis container's: redis needs no privilege: no capability, no
// escalation, a read-only root filesystem (it writes only its data directory); and
// Config.RunAsUser's user.
func (d *Driver) securityContext() *corev1.SecurityContext {
	sc := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	if u := d.cfg.RunAsUser; u != nil {
		sc.RunAsUser, sc.RunAsGroup, sc.RunAsNonRoot = ptr(*u), ptr(*u), ptr(*u != 0)
	}
	return sc
}

// podSecurityContext is a redis pod's: with Config.RunAsUser, the volumes' group, so
// that the user reads its config and writes its data.
func (d *Driver) podSecurityContext() *corev1.PodSecurityContext {
	if u := d.cfg.RunAsUser; u != nil {
		return &corev1.PodSecurityContext{FSGroup: ptr(*u)}
	}
	return nil
}

// updateStatefulSet applies change to sts and updates it when change says it changed
// something, again on a fresh copy when the controller wrote it meanwhile (its status).
func (d *Driver) updateStatefulSet(ctx context.Context, sts *appsv1.StatefulSet, change func(*appsv1.StatefulSet) bool) error {
	api := d.cfg.Client.AppsV1().StatefulSets(d.ns)
	name := sts.Name
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if sts == nil {
			var err error
			if sts, err = api.Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		if !change(sts) {
			return nil
		}
		_, err := api.Update(ctx, sts, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			sts = nil
		}
		return err
	})
}

func hasClaim(sts *appsv1.StatefulSet) bool { return len(sts.Spec.VolumeClaimTemplates) > 0 }

// containerMemory is the memory limit of the StatefulSet's redis container, 0 if none.
func containerMemory(sts *appsv1.StatefulSet) int64 {
	for _, c := range sts.Spec.Template.Spec.Containers {
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			return q.Value()
		}
	}
	return 0
}

// templateEqual reports whether the StatefulSet's pod template is what want's is, on
// what the driver sets (the API server fills in defaults of its own).
func templateEqual(have, want *appsv1.StatefulSet) bool {
	h, w := have.Spec.Template.Spec.Containers, want.Spec.Template.Spec.Containers
	if len(h) != 1 || len(w) != 1 {
		return false
	}
	return h[0].Image == w[0].Image && slices.Equal(h[0].Command, w[0].Command) && envEqual(h[0].Env, w[0].Env) &&
		equality.Semantic.DeepEqual(h[0].StartupProbe, w[0].StartupProbe) &&
		equality.Semantic.DeepEqual(h[0].ReadinessProbe, w[0].ReadinessProbe) &&
		h[0].Resources.Limits.Memory().Cmp(*w[0].Resources.Limits.Memory()) == 0 &&
		h[0].Resources.Requests.Memory().Cmp(*w[0].Resources.Requests.Memory()) == 0 &&
		maps.Equal(have.Spec.Template.Labels, want.Spec.Template.Labels) &&
		have.Spec.Template.Annotations[annotationTLS] == want.Spec.Template.Annotations[annotationTLS] &&
		equality.Semantic.DeepEqual(have.Spec.Template.Spec.Affinity, want.Spec.Template.Spec.Affinity)
}
