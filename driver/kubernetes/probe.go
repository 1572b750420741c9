package kubernetes

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"

	"clouddb/internal/redisconf"
)

// A pod is Ready only while its server holds the database's data: Kubernetes counts Ready
// pods for more than a Service's endpoints. A disruption budget (disruption.go) lets a
// drain evict a replicated database's node once the other is Ready; had a new, empty pod
// (a node drained, its data lost with it) been Ready as soon as its port listened, the
// drain's next try could evict the node that held the only copy. So two probes:
//
//   - startup (TCP): the server listens. The driver talks to a server from then on
//     (podStarted): it is the driver that gives a new node its part.
//   - readiness (readyScript, run by redis-cli in the container, over a Unix socket so
//     that it needs neither TLS nor the node's port): the server answers, no longer loads
//     its data, and is a primary (replicated databases' pods all start as replicas: only
//     Ensure promotes a node, the one with the most data) with slots when it is a cluster
//     node, or a replica whose link to its primary is up (its first sync done). A
//     replicated cluster's primary starts refusing writes (min-replicas-to-write, see
//     cluster.go) until Ensure has decided its shard: restarted without persistence, it
//     still serves its slots (its nodes.conf outlives the container), empty; while that
//     setting holds (INFO shows min_slaves_good_slaves), it is not Ready.
//
// The readiness probe also runs on a restarted container: one whose server was killed
// (its memory limit) and came back empty is not Ready until it holds the data again.

// readyScript fails (an error reply: redis-cli -e exits 1) unless the server holds its
// data (see above). no-writes lets it run on a replica and on a full server; allow-stale
// on a replica whose link is down.
const readyScript = `#!lua flags=no-writes,allow-stale
local repl = redis.call('INFO', 'replication')
if string.find(repl, 'role:slave', 1, true) then
  if string.find(repl, 'master_link_status:up', 1, true) then return 'ok' end
  return redis.error_reply('NOTREADY a replica whose link to its primary is down')
end
if string.find(repl, 'min_slaves_good_slaves:', 1, true) then
  return redis.error_reply('NOTREADY a primary that restarted, not yet confirmed by clouddb')
end
if not string.find(redis.call('INFO', 'cluster'), 'cluster_enabled:1', 1, true) then return 'ok' end
for line in string.gmatch(redis.call('CLUSTER', 'NODES'), '[^\n]+') do
  local f = {}
  for w in string.gmatch(line, '%S+') do f[#f + 1] = w end
  if f[3] and string.find(f[3], 'myself', 1, true) then
    if #f > 8 then return 'ok' end
    return redis.error_reply('NOTREADY a cluster primary that serves no slot')
  end
end
return redis.error_reply('NOTREADY no myself line in CLUSTER NODES')
`

// Where a database's server also listens, on a Unix socket, for its readiness probe.
const (
	socketDir  = "/run/clouddb"
	socketPath = socketDir + "/redis.sock"
	// envProbeAuth is redis-cli's own variable for a password: the probe's command line
	// carries none.
	envProbeAuth = "REDISCLI_AUTH"
)

// socketArgs open the probe's socket, for the container's own user only. On the command
// line, not in the Secret's redis.conf, which every pod reads at its start: a pod made
// from an older template has no socket directory, and a server that cannot bind its
// socket exits.
func socketArgs() []string {
	return []string{"--unixsocket", socketPath, "--unixsocketperm", "700"}
}

// startupProbe succeeds once the server listens on port (the bus port of a cluster
// node, whose client port differs from pod to pod). It never gives up on a server: one
// that cannot start exits, and the kubelet reports that.
func startupProbe(port int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}},
		PeriodSeconds:    1,
		TimeoutSeconds:   1,
		SuccessThreshold: 1,
		FailureThreshold: 3600,
	}
}

// readinessProbe runs readyScript as clouddb's own user. Every field is set, so that a
// template read back (with the API server's defaults) compares equal to a new one.
func readinessProbe() *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{
			"redis-cli", "-e", "-s", socketPath, "--user", redisconf.InternalUser, "eval", readyScript, "0",
		}}},
		// Each run is an exec in the container, some 35 ms of the node's CPU (see
		// BENCHMARKS.md): every 2 s that was near 2% of a core per idle database. A new
		// container is probed without waiting for the period once its startup probe
		// passed: the kubelet triggers it at its next sync of the pod, which waits for its
		// next relist of the containers (every 1 s), so a new pod is Ready about 1 s after
		// it runs. The period bounds only how soon a running server that stops holding
		// its data (a replica whose link dropped: it still has the data) leaves its
		// Service, and how soon a node Ensure configured counts as Ready.
		PeriodSeconds: 5,
		// An exec on a loaded node may be slow: a server that answers is not dropped
		// from its Service for that. A restarted container is not Ready until its first
		// success, whatever these say.
		TimeoutSeconds:   5,
		SuccessThreshold: 1,
		FailureThreshold: 2,
	}
}

// probeEnv gives the readiness probe clouddb's password, from the database's Secret.
func probeEnv(databaseID int) corev1.EnvVar {
	return corev1.EnvVar{Name: envProbeAuth, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: Name(databaseID)}, Key: keyInternal,
	}}}
}

// podStarted reports whether the pod's server listens (its startup probe passed, and the
// container runs): the driver may talk to it, whatever it holds.
func podStarted(pod *corev1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil && cs.Started != nil && *cs.Started {
			return true
		}
	}
	return false
}

// podReady reports whether the pod is Ready: its server holds the data (see above), and
// its Service routes to it.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// probeFailure is the kubelet's report of the pod's last failed readiness probe, "" when
// there is none (or the events cannot be read): why a pod that runs is not Ready, in the
// probe's own words (a replica not in sync, an image without redis-cli).
func (d *Driver) probeFailure(ctx context.Context, pod *corev1.Pod) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	events, err := d.cfg.Client.CoreV1().Events(d.ns).List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.uid", string(pod.UID)), fields.OneTermEqualSelector("reason", "Unhealthy"),
	).String()})
	if err != nil {
		return ""
	}
	var last *corev1.Event
	for i := range events.Items {
		e := &events.Items[i]
		if e.InvolvedObject.UID != pod.UID || e.Reason != "Unhealthy" || !strings.HasPrefix(e.Message, "Readiness probe") {
			continue
		}
		if last == nil || eventTime(e).After(eventTime(last)) {
			last = e
		}
	}
	if last == nil {
		return ""
	}
	return strings.Join(strings.Fields(last.Message), " ")
}

// eventTime is when the event last happened, by either API's field.
func eventTime(e *corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	return e.EventTime.Time
}
