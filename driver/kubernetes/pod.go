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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
	"clouddb/internal/redisconf"
)

// waitReady waits until the database's pod of that ordinal is Ready, or fails as soon as
// the pod shows it cannot run (its reason in the error). A pod that runs but is not
// ready when StartTimeout runs out is ErrServerStarting.
func (d *Driver) waitReady(ctx context.Context, databaseID, ordinal int) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	var last error
	for {
		pod, err := d.cfg.Client.CoreV1().Pods(d.ns).Get(ctx, nodePodName(databaseID, ordinal), metav1.GetOptions{})
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
			last = fmt.Errorf("pod %s does not exist yet", nodePodName(databaseID, ordinal))
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
	return redis.NewClient(&redis.Options{
		TLSConfig:             tc,
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
