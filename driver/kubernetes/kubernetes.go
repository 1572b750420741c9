// Package kubernetes is the data-plane driver that runs each database as Kubernetes
// objects with client-go, in one namespace: a StatefulSet of one redis pod, a Service
// that is its endpoint (a NodePort on the database's port), and a Secret with its
// redis.conf (the password, clouddb's own user, the ACL users). The Service and the
// Secret are owned by the StatefulSet, so that deleting it removes them; the data lives
// on a PersistentVolumeClaim of the StatefulSet when the database persists, and in the
// pod (an emptyDir) otherwise. Every object carries the labels LabelManagedBy and
// LabelDatabase, by which a restarted clouddb finds what exists.
//
// Not supported yet, with an explicit error: more than one shard, replication, OSS
// Cluster, TLS and replicaOf sources.
package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"clouddb"
	"clouddb/internal/redisconf"
)

// Labels on every object the driver makes.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "clouddb"
	LabelDatabase  = "clouddb.io/database"
	labelName      = "app.kubernetes.io/name"
)

// Defaults of Config.
const (
	DefaultStartTimeout = 2 * time.Minute
	defaultStopTimeout  = 2 * time.Minute
	// DefaultVolumeSize is the size of a persistent database's claim when the size does
	// not decide it: at least twice maxmemory (an AOF before its rewrite, an RDB beside
	// the one being written).
	minVolumeSize = 1 << 30
)

// ErrNotSupported is wrapped by the errors of what this driver does not do yet.
var ErrNotSupported = errors.New("not supported by the kubernetes driver yet")

// Config configures a Driver.
type Config struct {
	// Client talks to the cluster's API server.
	Client k8s.Interface
	// Namespace holds every database's objects.
	Namespace string
	// Images are the redis images by Redis version (major.minor), DefaultVersion's the
	// one of an instance that names none. The image's command must have redis-server on
	// its PATH.
	Images         map[string]string
	DefaultVersion string
	// ImagePullPolicy of the redis container; empty is Kubernetes' default.
	ImagePullPolicy corev1.PullPolicy
	// StorageClass of a persistent database's claim; empty is the cluster's default.
	StorageClass string
	// RunAsUser, if set, is the uid (and gid, and the volumes' group) the server runs as,
	// such as 999, the official redis image's user; the image's own user otherwise (the
	// official image's is root, which its entrypoint leaves, but the driver runs
	// redis-server directly). The volumes must honour fsGroup: hostPath ones, as in the
	// test cluster, do not.
	RunAsUser *int64
	// StartTimeout bounds Ensure's wait for the pod to be Ready and answer PING.
	StartTimeout time.Duration
	// NodeAddress is where the NodePort Services are reached from outside the cluster (a
	// node's address): PublicEndpoint names it.
	NodeAddress string
	// Logger receives the driver's logs; it never receives a password.
	Logger *slog.Logger
	// RedisServer is the redis-server binary of clouddb's own machine that Load checks
	// and measures files with (empty: redis-server in PATH), in TempDir (empty: the
	// system's).
	RedisServer string
	TempDir     string
	// DialSource, if set, opens the connections to import sources (CopyFrom): the place
	// for the address guard, since users choose those addresses.
	DialSource func(ctx context.Context, network, addr string) (net.Conn, error)
	// CA is the installation's certificate authority, which TLS import sources may be
	// signed by.
	CA clouddb.CertificateAuthority
}

// Driver is a clouddb.Driver on a Kubernetes cluster.
type Driver struct {
	cfg Config
	ns  string
	log *slog.Logger
}

var _ clouddb.Driver = (*Driver)(nil)

// New returns a Driver for cfg.
func New(cfg Config) (*Driver, error) {
	if cfg.Client == nil {
		return nil, errors.New("kubernetes driver: no client")
	}
	if cfg.Namespace == "" {
		return nil, errors.New("kubernetes driver: no namespace")
	}
	if cfg.Images[cfg.DefaultVersion] == "" {
		return nil, fmt.Errorf("kubernetes driver: no image for the default Redis version %q", cfg.DefaultVersion)
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Driver{cfg: cfg, ns: cfg.Namespace, log: cfg.Logger}, nil
}

// Name is the name of the StatefulSet, Service and Secret of a database.
func Name(databaseID int) string { return "clouddb-db-" + strconv.Itoa(databaseID) }

// podName is the name of the database's one pod (ordinal 0 of its StatefulSet).
func podName(databaseID int) string { return Name(databaseID) + "-0" }

func labels(databaseID int) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelDatabase: strconv.Itoa(databaseID), labelName: "redis"}
}

// selector picks the database's pods; it never changes (a StatefulSet's is immutable).
func selector(databaseID int) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelDatabase: strconv.Itoa(databaseID)}
}

// managedSelector picks every object the driver made.
const managedSelector = LabelManagedBy + "=" + ManagedBy

// PrivateEndpoint is the database's in-cluster address: its Service's DNS name.
func (d *Driver) PrivateEndpoint(databaseID int) string {
	return net.JoinHostPort(Name(databaseID)+"."+d.ns+".svc", strconv.Itoa(redisPort))
}

// PublicEndpoint is where a client outside the cluster reaches the database: its
// NodePort, which is the database's port, on Config.NodeAddress.
func (d *Driver) PublicEndpoint(port int) string {
	return net.JoinHostPort(d.cfg.NodeAddress, strconv.Itoa(port))
}

// supported refuses what the driver cannot run yet rather than run something else.
func (d *Driver) supported(in clouddb.Instance) error {
	var not []string
	if in.Shards > 1 {
		not = append(not, "more than one shard")
	}
	if in.Replication {
		not = append(not, "replication")
	}
	if in.OSSCluster {
		not = append(not, "OSS Cluster")
	}
	if in.TLS != nil {
		not = append(not, "TLS")
	}
	if len(in.ReplicaOf) > 0 {
		not = append(not, "replicaOf sources")
	}
	if len(not) > 0 {
		return fmt.Errorf("database %d: %s: %w", in.DatabaseID, strings.Join(not, ", "), ErrNotSupported)
	}
	if _, ok := redisconf.Persistences[in.DataPersistence]; !ok {
		return fmt.Errorf("database %d: unknown data persistence %q", in.DatabaseID, in.DataPersistence)
	}
	if in.MaxMemoryBytes <= 0 {
		return fmt.Errorf("database %d: no memory limit", in.DatabaseID)
	}
	return nil
}

func (d *Driver) image(in clouddb.Instance) (string, error) {
	v := in.RedisVersion
	if v == "" {
		v = d.cfg.DefaultVersion
	}
	img, ok := d.cfg.Images[v]
	if !ok {
		return "", fmt.Errorf("database %d: Redis %s: no image for it: %w", in.DatabaseID, v, ErrNotSupported)
	}
	return img, nil
}

func persistent(in clouddb.Instance) bool { return in.DataPersistence != "none" }

// Ensure makes the database run as in says: it creates its objects, or changes them and
// the live server (size, policy, persistence settings, password, users) without a restart,
// and waits until the pod is Ready and answers an authenticated PING.
func (d *Driver) Ensure(ctx context.Context, in clouddb.Instance) error {
	if err := d.supported(in); err != nil {
		return err
	}
	img, err := d.image(in)
	if err != nil {
		return err
	}
	sts, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).Get(ctx, Name(in.DatabaseID), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		sts, err = d.create(ctx, in, img)
		if err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	if hasClaim(sts) != persistent(in) {
		return fmt.Errorf("database %d: changing data persistence between none and a persistent one (its volume): %w", in.DatabaseID, ErrNotSupported)
	}
	secret, err := d.applySecret(ctx, in, sts)
	if err != nil {
		return err
	}
	if err = d.applyService(ctx, in, sts); err != nil {
		return err
	}
	oldLimit := containerMemory(sts)
	want := d.statefulSet(in, img)
	if err = d.updateStatefulSet(ctx, sts, func(sts *appsv1.StatefulSet) bool {
		if sts.Spec.Replicas != nil && *sts.Spec.Replicas == 1 && templateEqual(sts, want) {
			return false
		}
		sts.Spec.Replicas = want.Spec.Replicas
		sts.Spec.Template = want.Spec.Template
		return true
	}); err != nil {
		return fmt.Errorf("database %d: updating its statefulset: %w", in.DatabaseID, err)
	}
	pod, err := d.waitReady(ctx, in.DatabaseID)
	if err != nil {
		return err
	}
	// Onto the running server: the template changes only the pods to come (OnDelete).
	if err := d.applyLive(ctx, in, pod, string(secret.Data[keyInternal]), oldLimit); err != nil {
		return fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	return nil
}

// create makes the StatefulSet with no pod, then its Secret and Service owned by it; the
// caller scales it to one, once they exist.
func (d *Driver) create(ctx context.Context, in clouddb.Instance, img string) (*appsv1.StatefulSet, error) {
	sts := d.statefulSet(in, img)
	sts.Spec.Replicas = ptr(int32(0))
	sts, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).Create(ctx, sts, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("database %d: creating its statefulset: %w", in.DatabaseID, err)
	}
	d.log.Info("created the statefulset of a database", "database_id", in.DatabaseID, "namespace", d.ns)
	return sts, nil
}

func ptr[T any](v T) *T { return &v }

func ownedBy(sts *appsv1.StatefulSet) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID, Controller: ptr(true),
	}}
}

// statefulSet is the StatefulSet the instance wants, Replicas 1.
func (d *Driver) statefulSet(in clouddb.Instance, img string) *appsv1.StatefulSet {
	id := in.DatabaseID
	limit := resource.NewQuantity(memoryLimit(in.MaxMemoryBytes), resource.BinarySI)
	res := corev1.ResourceList{corev1.ResourceMemory: *limit}
	c := corev1.Container{
		Name:            "redis",
		Image:           img,
		ImagePullPolicy: d.cfg.ImagePullPolicy,
		Command:         []string{"redis-server", confDir + "/" + confFile},
		Ports:           []corev1.ContainerPort{{Name: "redis", ContainerPort: redisPort}},
		Resources:       corev1.ResourceRequirements{Requests: res, Limits: res},
		// A size change resizes the running container (see applyLive), not restart it.
		ResizePolicy: []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.NotRequired}},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "config", MountPath: confDir, ReadOnly: true},
			{Name: "data", MountPath: dataDir},
		},
		// redis needs no privilege: no capability, no escalation, a read-only root
		// filesystem (it writes only its data directory); and Config.RunAsUser's user.
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		// A server that exits at start says why in its last log lines (a bad setting, a
		// data directory it cannot write): Running and Ensure report them.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		// The port answers once the server listens; the driver's own PING checks the rest.
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(redisPort)}},
			PeriodSeconds: 2,
		},
	}
	volumes := []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: Name(id), Items: []corev1.KeyToPath{{Key: keyConfig, Path: confFile}}, DefaultMode: ptr(int32(0o440)),
	}}}}
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
	var podSecurity *corev1.PodSecurityContext
	if u := d.cfg.RunAsUser; u != nil {
		c.SecurityContext.RunAsUser, c.SecurityContext.RunAsGroup, c.SecurityContext.RunAsNonRoot = ptr(*u), ptr(*u), ptr(*u != 0)
		// The volumes' group, so that the user reads its config and writes its data.
		podSecurity = &corev1.PodSecurityContext{FSGroup: ptr(*u)}
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: Name(id), Namespace: d.ns, Labels: labels(id)},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr(int32(1)),
			ServiceName: Name(id),
			Selector:    &metav1.LabelSelector{MatchLabels: selector(id)},
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
					SecurityContext:               podSecurity,
					Volumes:                       volumes,
					AutomountServiceAccountToken:  ptr(false),
					EnableServiceLinks:            ptr(false),
					TerminationGracePeriodSeconds: ptr(int64(60)),
				},
			},
		},
	}
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
	return h[0].Image == w[0].Image && slices.Equal(h[0].Command, w[0].Command) &&
		h[0].Resources.Limits.Memory().Cmp(*w[0].Resources.Limits.Memory()) == 0 &&
		h[0].Resources.Requests.Memory().Cmp(*w[0].Resources.Requests.Memory()) == 0 &&
		maps.Equal(have.Spec.Template.Labels, want.Spec.Template.Labels)
}

// applySecret creates or updates the database's Secret: its redis.conf, the tenant's
// password and clouddb's own, which is made once and then kept.
func (d *Driver) applySecret(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet) (*corev1.Secret, error) {
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
	conf, err := renderConfig(in, internal)
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{keyConfig: conf, keyPassword: []byte(in.Password), keyInternal: []byte(internal)}
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

// applyService creates or updates the database's NodePort Service: the database's port
// on every node, to the pod's redis port.
func (d *Driver) applyService(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet) error {
	api := d.cfg.Client.CoreV1().Services(d.ns)
	svc, err := api.Get(ctx, Name(in.DatabaseID), metav1.GetOptions{})
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("database %d: reading its service: %w", in.DatabaseID, err)
	}
	port := corev1.ServicePort{Name: "redis", Protocol: corev1.ProtocolTCP, Port: redisPort, TargetPort: intstr.FromInt32(redisPort), NodePort: int32(in.Port)}
	if found {
		if svc.Spec.Type == corev1.ServiceTypeNodePort && len(svc.Spec.Ports) == 1 && svc.Spec.Ports[0].NodePort == port.NodePort &&
			maps.Equal(svc.Spec.Selector, selector(in.DatabaseID)) && len(svc.OwnerReferences) == 1 && svc.OwnerReferences[0].UID == sts.UID {
			return nil
		}
	} else {
		svc = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: Name(in.DatabaseID), Namespace: d.ns}}
	}
	svc.Labels, svc.OwnerReferences = labels(in.DatabaseID), ownedBy(sts)
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.Selector = selector(in.DatabaseID)
	svc.Spec.Ports = []corev1.ServicePort{port}
	if found {
		_, err = api.Update(ctx, svc, metav1.UpdateOptions{})
	} else {
		_, err = api.Create(ctx, svc, metav1.CreateOptions{})
	}
	if err != nil {
		if apierrors.IsInvalid(err) {
			return fmt.Errorf("database %d: its port %d must be a free NodePort of the cluster (its range is 30000-32767 by default: give clouddb a --db-ports range within it): %w", in.DatabaseID, in.Port, err)
		}
		return fmt.Errorf("database %d: writing its service: %w", in.DatabaseID, err)
	}
	return nil
}

// waitReady waits until the database's pod is Ready, or fails as soon as the pod shows
// it cannot run (its reason in the error). A pod that runs but is not ready when
// StartTimeout runs out is ErrServerStarting.
func (d *Driver) waitReady(ctx context.Context, databaseID int) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	var last error
	for {
		pod, err := d.cfg.Client.CoreV1().Pods(d.ns).Get(ctx, podName(databaseID), metav1.GetOptions{})
		switch {
		case err == nil && pod.DeletionTimestamp == nil:
			if podReady(pod) && pod.Status.PodIP != "" {
				return pod, nil
			}
			if why := cannotRun(pod); why != "" {
				return nil, fmt.Errorf("database %d: pod %s cannot run: %s", databaseID, pod.Name, why)
			}
			last = fmt.Errorf("pod %s is %s, not ready", pod.Name, pod.Status.Phase)
			if why := unschedulable(pod); why != "" {
				last = fmt.Errorf("pod %s is %s", pod.Name, why)
			}
			if running(pod) {
				last = fmt.Errorf("pod %s runs, not ready yet: %w", pod.Name, clouddb.ErrServerStarting)
			}
		case err == nil:
			last = fmt.Errorf("pod %s is being deleted", pod.Name)
		case apierrors.IsNotFound(err):
			last = fmt.Errorf("pod %s does not exist yet", podName(databaseID))
		case ctx.Err() == nil:
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = ctx.Err()
			}
			return nil, fmt.Errorf("database %d: not ready after %v: %w", databaseID, d.cfg.StartTimeout, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func running(pod *corev1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return true
		}
	}
	return false
}

// waitingReasons are the reasons a container waits that will not pass by themselves.
var waitingReasons = map[string]bool{
	"CrashLoopBackOff": true, "ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true,
	"InvalidImageName": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// cannotRun says why the pod cannot run, or "" while it may still come up: a container
// that waits for a reason that will not pass, or one that ended and is not restarted yet.
func cannotRun(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && waitingReasons[w.Reason] {
			why := "container " + cs.Name + " waits: " + w.Reason
			if w.Message != "" {
				why += ": " + w.Message
			}
			if t := cs.LastTerminationState.Terminated; t != nil {
				why += fmt.Sprintf(" (last exit: %s, code %d)", t.Reason, t.ExitCode)
			}
			return why
		}
		if t := cs.State.Terminated; t != nil {
			return fmt.Sprintf("container %s terminated: %s, exit code %d %s", cs.Name, t.Reason, t.ExitCode, t.Message)
		}
	}
	if pod.Status.Phase == corev1.PodFailed {
		return "failed: " + pod.Status.Reason + " " + pod.Status.Message
	}
	return ""
}

// unschedulable is why the scheduler cannot place the pod yet, or "": it may pass (a
// claim being provisioned, a node coming back), so it is only reported, never final.
func unschedulable(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return "unschedulable: " + c.Message
		}
	}
	return ""
}

// client opens a connection to the pod's server as clouddb's own user.
func client(pod *corev1.Pod, internal string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                  net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(redisPort)),
		Username:              redisconf.InternalUser,
		Password:              internal,
		MaxRetries:            -1,
		PoolSize:              1,
		DialTimeout:           5 * time.Second,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
	})
}

// ping is an authenticated PING; a server that loads its data is ErrServerStarting.
func ping(ctx context.Context, c *redis.Client) error {
	err := c.Ping(ctx).Err()
	if err != nil && strings.HasPrefix(err.Error(), "LOADING") {
		return fmt.Errorf("%w: %v", clouddb.ErrServerStarting, err)
	}
	return err
}

// applyLive brings the running server in line: its container's memory limit (resized in
// place before a larger maxmemory, so that the server never has more than its
// container), its settings and its users.
func (d *Driver) applyLive(ctx context.Context, in clouddb.Instance, pod *corev1.Pod, internal string, oldLimit int64) error {
	c := client(pod, internal)
	defer c.Close()
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
	if err := set("default", redisconf.DefaultUser("#"+redisconf.PasswordHash(in.Password), false, in.DefaultUserOff)); err != nil {
		return fmt.Errorf("ACL SETUSER default: %w", err)
	}
	want := map[string]bool{"default": true, redisconf.InternalUser: true}
	for _, u := range in.Users {
		want[u.Name] = true
		if err := set(u.Name, redisconf.UserRules("#"+redisconf.PasswordHash(u.Password), u.Rule, false)); err != nil {
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
// size needs and answers an authenticated PING. A pod that cannot run is an error that says why.
func (d *Driver) Running(ctx context.Context, in clouddb.Instance) (bool, error) {
	sts, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).Get(ctx, Name(in.DatabaseID), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 1 || containerMemory(sts) != memoryLimit(in.MaxMemoryBytes) {
		return false, nil
	}
	pod, err := d.cfg.Client.CoreV1().Pods(d.ns).Get(ctx, podName(in.DatabaseID), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	if why := cannotRun(pod); why != "" {
		return false, fmt.Errorf("database %d: pod %s cannot run: %s", in.DatabaseID, pod.Name, why)
	}
	if why := unschedulable(pod); why != "" {
		return false, fmt.Errorf("database %d: pod %s is %s", in.DatabaseID, pod.Name, why)
	}
	// A container with more memory than the size needs is fine (see applyLive).
	if !podReady(pod) || pod.Status.PodIP == "" || podMemory(pod) < memoryLimit(in.MaxMemoryBytes) {
		return false, nil
	}
	secret, err := d.cfg.Client.CoreV1().Secrets(d.ns).Get(ctx, Name(in.DatabaseID), metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("database %d: reading its secret: %w", in.DatabaseID, err)
	}
	internal := string(secret.Data[keyInternal])
	// The configuration the pod starts with is the instance's: its settings, password and
	// users (Ensure writes it first).
	if conf, cerr := renderConfig(in, internal); cerr != nil || string(secret.Data[keyConfig]) != string(conf) {
		return false, nil
	}
	c := client(pod, internal)
	defer c.Close()
	if err = ping(ctx, c); err != nil {
		d.log.Warn("a database's pod is ready but does not answer PING", "database_id", in.DatabaseID, "error", err)
		return false, nil
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
// persistence, its default user's password (on or off as asked) and exactly its named
// users, each with its password.
func liveAsAsked(ctx context.Context, c *redis.Client, in clouddb.Instance) (bool, error) {
	p := redisconf.Persistences[in.DataPersistence]
	want := map[string]string{
		"maxmemory":        strconv.FormatInt(in.MaxMemoryBytes, 10),
		"maxmemory-policy": in.EvictionPolicy,
		"appendonly":       p.Appendonly,
		"appendfsync":      p.Appendfsync,
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
	slices.Sort(wantNames)
	if !slices.Equal(names, wantNames) {
		return false, nil
	}
	for name, password := range users {
		reply, err := c.Do(ctx, "acl", "getuser", name).Result()
		if err != nil {
			return false, fmt.Errorf("ACL GETUSER %s: %w", name, err)
		}
		var fields []any
		switch r := reply.(type) {
		case []any: // RESP2
			fields = r
		case map[any]any: // RESP3
			for k, v := range r {
				fields = append(fields, k, v)
			}
		default:
			return false, fmt.Errorf("ACL GETUSER %s: unexpected reply %T", name, reply)
		}
		var flags, hashes []any
		for i := 0; i+1 < len(fields); i += 2 {
			switch fmt.Sprint(fields[i]) {
			case "flags":
				flags, _ = fields[i+1].([]any)
			case "passwords":
				hashes, _ = fields[i+1].([]any)
			}
		}
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

// Stop scales the database's StatefulSet to zero and waits until its pod is gone: redis
// persists on SIGTERM as configured, and the claim keeps the data.
func (d *Driver) Stop(ctx context.Context, databaseID int) error {
	api := d.cfg.Client.AppsV1().StatefulSets(d.ns)
	sts, err := api.Get(ctx, Name(databaseID), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("database %d: %w", databaseID, err)
	}
	if err := d.updateStatefulSet(ctx, sts, func(sts *appsv1.StatefulSet) bool {
		if sts.Spec.Replicas != nil && *sts.Spec.Replicas == 0 {
			return false
		}
		sts.Spec.Replicas = ptr(int32(0))
		return true
	}); err != nil {
		return fmt.Errorf("database %d: scaling its statefulset to 0: %w", databaseID, err)
	}
	return d.waitGone(ctx, databaseID, "its pod stops", func(ctx context.Context) (bool, error) {
		_, err := d.cfg.Client.CoreV1().Pods(d.ns).Get(ctx, podName(databaseID), metav1.GetOptions{})
		return apierrors.IsNotFound(err), ignoreNotFound(err)
	})
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// waitGone polls done until it answers true, for at most defaultStopTimeout.
func (d *Driver) waitGone(ctx context.Context, databaseID int, what string, done func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, defaultStopTimeout)
	defer cancel()
	for {
		ok, err := done(ctx)
		if ok {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("database %d: waiting until %s: %w", databaseID, what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("database %d: waiting until %s: %w", databaseID, what, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Remove deletes the database's StatefulSet (its Service and Secret go with it, as its
// dependents), its claims, and waits until none of its labelled objects is left.
func (d *Driver) Remove(ctx context.Context, databaseID int) error {
	bg := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{PropagationPolicy: &bg}
	name := Name(databaseID)
	if err := d.cfg.Client.AppsV1().StatefulSets(d.ns).Delete(ctx, name, del); ignoreNotFound(err) != nil {
		return fmt.Errorf("database %d: deleting its statefulset: %w", databaseID, err)
	}
	// Owned, so the garbage collector deletes them too; deleting them here does not
	// depend on it, nor on an object that lost its owner reference.
	if err := d.cfg.Client.CoreV1().Services(d.ns).Delete(ctx, name, del); ignoreNotFound(err) != nil {
		return fmt.Errorf("database %d: deleting its service: %w", databaseID, err)
	}
	if err := d.cfg.Client.CoreV1().Secrets(d.ns).Delete(ctx, name, del); ignoreNotFound(err) != nil {
		return fmt.Errorf("database %d: deleting its secret: %w", databaseID, err)
	}
	one := metav1.ListOptions{LabelSelector: LabelDatabase + "=" + strconv.Itoa(databaseID) + "," + managedSelector}
	if err := d.cfg.Client.CoreV1().PersistentVolumeClaims(d.ns).DeleteCollection(ctx, del, one); ignoreNotFound(err) != nil {
		return fmt.Errorf("database %d: deleting its volumes: %w", databaseID, err)
	}
	return d.waitGone(ctx, databaseID, "its objects are gone", func(ctx context.Context) (bool, error) {
		left, err := d.objects(ctx, one)
		return err == nil && len(left) == 0, err
	})
}

// objects names the driver's objects that match opts: StatefulSets, pods, Services,
// Secrets and claims.
func (d *Driver) objects(ctx context.Context, opts metav1.ListOptions) ([]string, error) {
	var out []string
	sts, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, o := range sts.Items {
		out = append(out, "statefulset/"+o.Name)
	}
	pods, err := d.cfg.Client.CoreV1().Pods(d.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, o := range pods.Items {
		out = append(out, "pod/"+o.Name)
	}
	svcs, err := d.cfg.Client.CoreV1().Services(d.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, o := range svcs.Items {
		out = append(out, "service/"+o.Name)
	}
	secrets, err := d.cfg.Client.CoreV1().Secrets(d.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, o := range secrets.Items {
		out = append(out, "secret/"+o.Name)
	}
	pvcs, err := d.cfg.Client.CoreV1().PersistentVolumeClaims(d.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, o := range pvcs.Items {
		out = append(out, "persistentvolumeclaim/"+o.Name)
	}
	return out, nil
}

// Instances lists the databases that have a StatefulSet or a claim (data) in the
// namespace, by their labels.
func (d *Driver) Instances(ctx context.Context) ([]int, error) {
	opts := metav1.ListOptions{LabelSelector: managedSelector}
	seen := map[int]bool{}
	add := func(l map[string]string) {
		if id, err := strconv.Atoi(l[LabelDatabase]); err == nil && id > 0 {
			seen[id] = true
		}
	}
	sts, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing statefulsets: %w", err)
	}
	for _, o := range sts.Items {
		add(o.Labels)
	}
	pvcs, err := d.cfg.Client.CoreV1().PersistentVolumeClaims(d.ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing persistent volume claims: %w", err)
	}
	for _, o := range pvcs.Items {
		add(o.Labels)
	}
	return slices.Sorted(maps.Keys(seen)), nil
}
