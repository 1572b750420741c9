package kubernetes

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
	"clouddb/internal/aclcheck"
	"clouddb/internal/redisconf"
)

// Rules are checked (clouddb.ACLChecker) on a server of each image the driver offers, in
// the cluster, as the databases run them: a StatefulSet of one pod per image, a checker,
// made at the first check and kept for Config.ACLCheckIdle after the last one, so that
// the checks of a burst of rule changes cost one pod start. A StatefulSet, not a bare
// pod, so that the Role the driver runs with needs no right to make pods. It carries
// LabelManagedBy but no LabelDatabase: Instances never lists it.
const (
	// labelACLCheck's value tells the checkers of different images apart.
	labelACLCheck = "clouddb.io/acl-check"
	// annotationACLCheck is the hash of the password a checker's server takes, on its pod
	// template: a checker made by another Driver (before clouddb restarted) is replaced.
	annotationACLCheck = "clouddb.io/acl-check-password-hash"
	// DefaultACLCheckIdle is Config.ACLCheckIdle's default.
	DefaultACLCheckIdle = 5 * time.Minute
	// aclCheckMemory is a checker's memory limit: an empty server's few MiB, and the
	// rules' users.
	aclCheckMemory = 64 << 20
	// aclCheckTimeout bounds the rules' definition on a ready checker (one round trip).
	aclCheckTimeout = 30 * time.Second
)

// aclChecker is the state of a Driver's checkers.
type aclChecker struct {
	// sem lets one check (and the checker it makes or deletes) run at a time, so that
	// concurrent checks never start the same checker twice; idle deletion waits for no
	// check.
	sem      chan struct{}
	verdicts *aclcheck.Cache

	mu       sync.Mutex
	password string      // the checkers' servers', made at the first check
	idle     *time.Timer // deletes the checkers ACLCheckIdle after the last check
}

func newACLChecker() *aclChecker {
	// The Driver's own memory, keyed by image: a reference may name other images in
	// another namespace or cluster (another Driver).
	return &aclChecker{sem: make(chan struct{}, 1), verdicts: aclcheck.NewCache(aclcheck.MaxVerdicts)}
}

var _ clouddb.ACLChecker = (*Driver)(nil)

// CheckACLRules verifies rules, composed as named users get them, on a server of each
// image the driver offers (see aclcheck.Checker): one checker pod per image for the whole
// batch, and verdicts remembered by image, so that a rule costs one check per image and
// Driver. A checker that cannot start (an image missing, a pod not schedulable within
// StartTimeout) fails the check, with the pod's reason, and is deleted.
func (d *Driver) CheckACLRules(ctx context.Context, rules []string) error {
	c := &aclcheck.Checker{
		Versions: d.cfg.Images,
		Key:      func(img string) (string, bool) { return img + "\x00", true },
		Verdicts: d.acl.verdicts,
		Run:      d.runCheck,
	}
	return c.Check(ctx, rules)
}

// runCheck defines rules on the checker of img, which it makes if needed, and keeps it
// for ACLCheckIdle.
func (d *Driver) runCheck(ctx context.Context, img string, rules []string) (map[string]aclcheck.Verdict, error) {
	select {
	case d.acl.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() {
		<-d.acl.sem
		d.acl.mu.Lock()
		if d.acl.idle == nil {
			d.acl.idle = time.AfterFunc(d.aclCheckIdle(), d.retireCheckers)
		} else {
			d.acl.idle.Reset(d.aclCheckIdle())
		}
		d.acl.mu.Unlock()
	}()
	pass, err := d.checkPassword()
	if err != nil {
		return nil, err
	}
	name := checkerName(img)
	pod, err := d.checker(ctx, img, pass)
	if err != nil {
		// Not left pending or crash-looping: the next check makes it again.
		d.deleteChecker(context.WithoutCancel(ctx), name)
		return nil, fmt.Errorf("check ACL rules on image %s: checker %s: %w", img, name, err)
	}
	c := client(pod, pass, nil)
	defer c.Close()
	dctx, cancel := context.WithTimeout(ctx, aclCheckTimeout)
	defer cancel()
	verdicts, err := aclcheck.Define(dctx, c, rules)
	if err != nil {
		// Its server may be gone (its node, its container): the next check starts afresh.
		d.deleteChecker(context.WithoutCancel(ctx), name)
		return nil, fmt.Errorf("check ACL rules on image %s: pod %s: %w", img, pod.Name, err)
	}
	return verdicts, nil
}

func (d *Driver) aclCheckIdle() time.Duration {
	if d.cfg.ACLCheckIdle > 0 {
		return d.cfg.ACLCheckIdle
	}
	return DefaultACLCheckIdle
}

// checkPassword is the password of this Driver's checkers, made at its first check. The
// pod template holds only its hash.
func (d *Driver) checkPassword() (string, error) {
	d.acl.mu.Lock()
	defer d.acl.mu.Unlock()
	if d.acl.password == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return "", fmt.Errorf("check ACL rules: %w", err)
		}
		d.acl.password = hex.EncodeToString(b)
	}
	return d.acl.password, nil
}

// checkerName is the name of the checker of img: one per image and namespace, whoever
// makes it.
func checkerName(img string) string { return "clouddb-aclcheck-" + imageLabel(img) }

// imageLabel identifies img in a name and a label value (which an image reference may
// not be).
func imageLabel(img string) string {
	sum := sha256.Sum256([]byte(img))
	return hex.EncodeToString(sum[:5])
}

// checker returns the ready pod of img's checker, whose server takes pass: the checker
// is made if missing, and replaced if another Driver made it. It waits StartTimeout at
// most.
func (d *Driver) checker(ctx context.Context, img, pass string) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	api := d.cfg.Client.AppsV1().StatefulSets(d.ns)
	want := d.checkerSet(img, pass)
	hash := want.Spec.Template.Annotations[annotationACLCheck]
	for {
		sts, err := api.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			d.deleteStaleCheckers(ctx)
			_, err = api.Create(ctx, want, metav1.CreateOptions{})
			if err == nil {
				d.log.Info("created a checker of ACL rules", "statefulset", want.Name, "image", img)
			} else if !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("creating its statefulset: %w", err)
			}
			continue
		case err != nil:
			return nil, err
		case sts.DeletionTimestamp == nil && sts.Spec.Template.Annotations[annotationACLCheck] == hash &&
			len(sts.Spec.Template.Spec.Containers) == 1 && sts.Spec.Template.Spec.Containers[0].Image == img:
			return d.waitPod(ctx, want.Name+"-0", func(p *corev1.Pod) bool {
				return p.Annotations[annotationACLCheck] == hash && metav1.IsControlledBy(p, sts)
			}, podStarted)
		case sts.DeletionTimestamp == nil:
			// Its server's password is another Driver's.
			d.deleteChecker(ctx, want.Name)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("statefulset %s still being replaced after %v", want.Name, d.cfg.StartTimeout)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// checkerSet is the StatefulSet of img's checker: a server that listens on redisPort of
// its pod, saves nothing, and lets in only clouddb's own user with pass (the default
// user is off); as a database's server runs (securityContext, memory limit), without a
// volume.
func (d *Driver) checkerSet(img, pass string) *appsv1.StatefulSet {
	name := checkerName(img)
	l := map[string]string{LabelManagedBy: ManagedBy, labelName: "redis-acl-check", labelACLCheck: imageLabel(img)}
	mem := corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(aclCheckMemory, resource.BinarySI)}
	hash := redisconf.PasswordHash(pass)
	cmd := []string{"redis-server", "--port", fmt.Sprint(redisPort), "--bind", "0.0.0.0", "--save", "", "--appendonly", "no",
		"--user", "default", "reset", "--user", redisconf.InternalUser}
	// The hash, not the password: the pod's spec is readable by more than its Secrets.
	cmd = append(cmd, redisconf.InternalUserRules("#"+hash)...)
	c := corev1.Container{
		Name:                     "redis",
		Image:                    img,
		ImagePullPolicy:          d.cfg.ImagePullPolicy,
		Command:                  cmd,
		Ports:                    []corev1.ContainerPort{{Name: "redis", ContainerPort: redisPort}},
		Resources:                corev1.ResourceRequirements{Requests: mem, Limits: mem},
		SecurityContext:          d.securityContext(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		StartupProbe:             startupProbe(redisPort),
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.ns, Labels: l},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr(int32(1)),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{LabelManagedBy: ManagedBy, labelACLCheck: imageLabel(img)}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l, Annotations: map[string]string{annotationACLCheck: hash}},
				Spec: corev1.PodSpec{
					Containers:                   []corev1.Container{c},
					SecurityContext:              d.podSecurityContext(),
					AutomountServiceAccountToken: ptr(false),
					EnableServiceLinks:           ptr(false),
					// It holds nothing to save.
					TerminationGracePeriodSeconds: ptr(int64(1)),
				},
			},
		},
	}
}

// checkerSelector picks every checker of the namespace.
const checkerSelector = managedSelector + "," + labelACLCheck

// deleteStaleCheckers deletes the checkers of images the driver no longer offers (its
// configuration changed): no check uses them again.
func (d *Driver) deleteStaleCheckers(ctx context.Context) {
	list, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).List(ctx, metav1.ListOptions{LabelSelector: checkerSelector})
	if err != nil {
		d.log.Warn("listing the checkers of ACL rules", "error", err)
		return
	}
	var current []string
	for _, img := range d.cfg.Images {
		current = append(current, checkerName(img))
	}
	for _, sts := range list.Items {
		if !slices.Contains(current, sts.Name) {
			d.deleteChecker(ctx, sts.Name)
		}
	}
}

// retireCheckers deletes every checker of the namespace, ACLCheckIdle after the last
// check; a check that runs meanwhile arms the timer again.
func (d *Driver) retireCheckers() {
	// Its own goroutine (time.AfterFunc): a panic here would end clouddb.
	defer func() {
		if p := clouddb.Recovered(recover()); p != nil {
			d.log.Error("deleting the checkers of ACL rules panicked", "panic", p.Value, "stack", string(p.Stack))
		}
	}()
	select {
	case d.acl.sem <- struct{}{}:
	default:
		return
	}
	defer func() { <-d.acl.sem }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).List(ctx, metav1.ListOptions{LabelSelector: checkerSelector})
	if err != nil {
		d.log.Warn("listing the checkers of ACL rules to delete them", "error", err)
		return
	}
	for _, sts := range list.Items {
		d.deleteChecker(ctx, sts.Name)
	}
}

// deleteChecker deletes a checker's StatefulSet; its pod goes with it (in the
// background: a checker made again waits for the pod it wants).
func (d *Driver) deleteChecker(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := d.cfg.Client.AppsV1().StatefulSets(d.ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationBackground)})
	if err != nil && !apierrors.IsNotFound(err) {
		d.log.Warn("deleting a checker of ACL rules", "statefulset", name, "error", err)
		return
	}
	if err == nil {
		d.log.Info("deleted a checker of ACL rules", "statefulset", name)
	}
}
