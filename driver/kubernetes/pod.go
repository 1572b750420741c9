package kubernetes

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
	"clouddb/internal/redisconf"
	"clouddb/redisdata"
)

// waitStarted waits until the server of the database's pod of that ordinal listens (see
// probe.go), or fails as soon as the pod shows it cannot run (its reason in the error). A
// pod still on its way when StartTimeout runs out (running but not listening, pending:
// not scheduled yet, its volume not attached yet, being replaced) is ErrServerStarting: a
// node lost or drained, a claim that follows its pod slowly, pass by themselves, and the
// reconciler tries again rather than put a database whose data may be safe in a volume in
// error for good.
func (d *Driver) waitStarted(ctx context.Context, databaseID, ordinal int) (*corev1.Pod, error) {
	pod, err := d.waitPod(ctx, nodePodName(databaseID, ordinal), nil, podStarted)
	if err != nil {
		return nil, fmt.Errorf("database %d: %w", databaseID, err)
	}
	return pod, nil
}

// waitServing is waitStarted until the pod is Ready: its server holds the data, and the
// Service routes to it.
func (d *Driver) waitServing(ctx context.Context, databaseID, ordinal int) (*corev1.Pod, error) {
	pod, err := d.waitPod(ctx, nodePodName(databaseID, ordinal), nil, podReady)
	if err != nil {
		return nil, fmt.Errorf("database %d: %w", databaseID, err)
	}
	return pod, nil
}

// waitPod waits until the pod of that name is up (podStarted or podReady); with wanted,
// only a pod it wants is waited for (one a replaced StatefulSet left is not).
func (d *Driver) waitPod(ctx context.Context, name string, wanted, up func(*corev1.Pod) bool) (*corev1.Pod, error) {
	outer := ctx
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	var last error
	// The pod last seen started but not Ready (its probe says why), kept over a failed
	// read: the last one, when the time is up, is one.
	var notReady *corev1.Pod
	for {
		pod, err := d.cfg.Client.CoreV1().Pods(d.ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			notReady = nil
		}
		switch {
		case err == nil && wanted != nil && !wanted(pod):
			last = fmt.Errorf("pod %s is not the one wanted yet", pod.Name)
		case err == nil && pod.DeletionTimestamp == nil:
			if up(pod) && pod.Status.PodIP != "" {
				return pod, nil
			}
			if why := cannotRun(pod); why != "" {
				return nil, fmt.Errorf("pod %s cannot run: %s", pod.Name, why)
			}
			last = fmt.Errorf("pod %s is %s, not ready: %w", pod.Name, pod.Status.Phase, clouddb.ErrServerStarting)
			if why := unschedulable(pod); why != "" {
				last = fmt.Errorf("pod %s is %s: %w", pod.Name, why, clouddb.ErrServerStarting)
			}
			switch {
			case podStarted(pod):
				notReady = pod
				last = fmt.Errorf("pod %s runs its server, which does not hold the data yet (not Ready: a replica not in sync, a cluster node without slots): %w", pod.Name, clouddb.ErrServerStarting)
			case running(pod):
				last = fmt.Errorf("pod %s runs, its server does not listen yet: %w", pod.Name, clouddb.ErrServerStarting)
			}
		case err == nil:
			last = fmt.Errorf("pod %s is being deleted: %w", pod.Name, clouddb.ErrServerStarting)
		case apierrors.IsNotFound(err):
			last = fmt.Errorf("pod %s does not exist yet: %w", name, clouddb.ErrServerStarting)
		case ctx.Err() == nil:
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = ctx.Err()
			}
			if notReady != nil {
				if why := d.probeFailure(outer, notReady); why != "" {
					last = fmt.Errorf("%w; %s", last, why)
				}
			}
			return nil, fmt.Errorf("not ready after %v: %w", d.cfg.StartTimeout, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// podsOf lists the database's pods.
func (d *Driver) podsOf(ctx context.Context, id int) ([]corev1.Pod, error) {
	pods, err := d.cfg.Client.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{
		LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: selector(id)}),
	})
	if err != nil {
		return nil, fmt.Errorf("database %d: listing its pods: %w", id, err)
	}
	return pods.Items, nil
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
// that waits for a reason that will not pass. A container that ended is not one: the
// kubelet starts it again at once (a replicated database's crashed primary comes back so,
// as a replica), and one that keeps failing waits in CrashLoopBackOff, with its last
// exit's reason and log lines.
func cannotRun(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && waitingReasons[w.Reason] {
			why := "container " + cs.Name + " waits: " + w.Reason
			if w.Message != "" {
				why += ": " + w.Message
			}
			if t := cs.LastTerminationState.Terminated; t != nil {
				why += fmt.Sprintf(" (last exit: %s, code %d) %s", t.Reason, t.ExitCode, t.Message)
			}
			return why
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

// client opens a connection to the pod's server as clouddb's own user, over TLS with tc
// when not nil (see podTLS).
func client(pod *corev1.Pod, internal string, tc *tls.Config) *redis.Client {
	return clientAt(pod, redisPort, internal, tc)
}

// clientAt is client to the pod's server on port (a cluster node's own, see cluster.go).
func clientAt(pod *corev1.Pod, port int, internal string, tc *tls.Config) *redis.Client {
	return endpointClient(redisdata.Endpoint{
		Addr:     net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)),
		Username: redisconf.InternalUser,
		Password: internal,
		TLS:      tc,
	})
}

// endpointClient is a client of clouddb's own to the server of ep.
func endpointClient(ep redisdata.Endpoint) *redis.Client {
	return redis.NewClient(&redis.Options{
		TLSConfig:             ep.TLS,
		Addr:                  ep.Addr,
		Username:              ep.Username,
		Password:              ep.Password,
		MaxRetries:            -1,
		PoolSize:              1,
		DialTimeout:           5 * time.Second,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
		// Redis 7.0 has no maintenance notifications: no handshake for them.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
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

// replaceUnscheduled deletes the database's pods that were never scheduled, or whose
// image was never pulled, and were made from another template than want's (OnDelete
// keeps a pod as it was made): a pod too large for any node stays pending with its old
// size after the database is made smaller; one of an image that cannot be pulled waits
// for it after the operator corrected it; one whose claim never binds (no such storage
// class, a quota) waits for it after its persistence was taken back. Its server never
// ran: it holds no data, and the StatefulSet makes it again from want's template.
func (d *Driver) replaceUnscheduled(ctx context.Context, databaseID int, want *appsv1.StatefulSet) error {
	pods, err := d.cfg.Client.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{
		LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: selector(databaseID)}),
	})
	if err != nil {
		return fmt.Errorf("database %d: listing its pods: %w", databaseID, err)
	}
	w := want.Spec.Template.Spec.Containers[0]
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || len(p.Spec.Containers) != 1 {
			continue
		}
		if p.Spec.NodeName != "" && !imageNotPulled(&p) {
			continue
		}
		c := p.Spec.Containers[0]
		if c.Image == w.Image && c.Resources.Requests.Memory().Cmp(*w.Resources.Requests.Memory()) == 0 &&
			equality.Semantic.DeepEqual(p.Spec.Affinity, want.Spec.Template.Spec.Affinity) && hasVolumeClaim(&p) == hasClaim(want) {
			continue
		}
		err = d.cfg.Client.CoreV1().Pods(d.ns).Delete(ctx, p.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr(int64(0)), Preconditions: &metav1.Preconditions{UID: &p.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("database %d: replacing its unscheduled pod %s: %w", databaseID, p.Name, err)
		}
		d.log.Info("replaced a pod that was never scheduled by one of the database's new template", "database_id", databaseID, "pod", p.Name)
	}
	return nil
}

// imageNotPulled reports whether the pod's server never ran for want of its image (a
// cluster node's patched image is not one: its server ran before, see version.go).
func imageNotPulled(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w == nil || !pullReasons[w.Reason] || cs.RestartCount > 0 || cs.LastTerminationState.Terminated != nil {
			return false
		}
	}
	return len(p.Status.ContainerStatuses) > 0
}

// pullReasons are the reasons a container waits for its image.
var pullReasons = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true, "InvalidImageName": true}

// deletePod deletes the database's pod (that one: by its UID), with a grace period of
// its own when grace is not nil, and waits until it is gone or made again by its
// StatefulSet.
func (d *Driver) deletePod(ctx context.Context, id int, pod *corev1.Pod, grace *int64) error {
	api := d.cfg.Client.CoreV1().Pods(d.ns)
	err := api.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: grace, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("database %d: deleting pod %s: %w", id, pod.Name, err)
	}
	return d.waitGone(ctx, id, "pod "+pod.Name+" is deleted", func(ctx context.Context) (bool, error) {
		now, gerr := api.Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(gerr) || gerr == nil && now.UID != pod.UID, ignoreNotFound(gerr)
	})
}

// servingPod is the database's pod of that ordinal when it is Ready, with its address and
// the memory a maxmemory of maxMemory needs (a container with more is fine, see
// applyLive); nil when it is not (yet), and an error that says why when it cannot run or
// cannot be placed.
func (d *Driver) servingPod(ctx context.Context, databaseID, ordinal int, maxMemory int64) (*corev1.Pod, error) {
	pod, err := d.cfg.Client.CoreV1().Pods(d.ns).Get(ctx, nodePodName(databaseID, ordinal), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("database %d: %w", databaseID, err)
	}
	if why := cannotRun(pod); why != "" {
		return nil, fmt.Errorf("database %d: pod %s cannot run: %s", databaseID, pod.Name, why)
	}
	if why := unschedulable(pod); why != "" {
		return nil, fmt.Errorf("database %d: pod %s is %s", databaseID, pod.Name, why)
	}
	if !podReady(pod) || pod.Status.PodIP == "" || podMemory(pod) < memoryLimit(maxMemory) {
		return nil, nil
	}
	return pod, nil
}
