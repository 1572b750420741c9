package kubernetes

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"clouddb"
	"clouddb/internal/pki"
)

// TLS. A database with TLS serves its port with TLS only (port 0, tls-port), with a
// server certificate of Config.CA for the names a client reaches it by (the node address
// of its NodePort, its Service's DNS names). The material lives in the database's Secret:
// the CA bundle (the CA, so that clouddb's own client certificate is accepted, and the
// tenant's client certificates, required when there is any), the server's certificate
// and key, and the client certificate clouddb presents (replication speaks TLS with it).
//
// A renewed certificate and new client certificates (or none) are taken live, without a
// new pod: a pod's volume items are fixed at its creation, so a TLS pod mounts the whole
// Secret, where the TLS files are also held under keys named after their content
// (tlsPath), which its redis.conf names (keyLiveConfig). The kubelet swaps a mounted
// Secret's files all at once, so a server that restarts reads a config and files that
// belong together. Ensure then has each server load the new files with one CONFIG SET of
// every tls-* file setting (applyTLSFiles): their new paths make redis load them (it
// fails, changing nothing, while the pod does not show them yet, and Ensure tries again).
// An annotation of the pod that Ensure updates (annotationTLSFiles) has the kubelet
// refresh its volumes at once rather than within its sync period.
//
// Turning TLS on or off is a new pod, which Ensure makes with the data kept (see settle;
// a replicated database's nodes one at a time, see renewNodes), as is a TLS pod made
// before files were taken live (its volume's items name its files and a redis.conf
// after a digest of them). The material stays in the Secret while TLS is off, for the pods that still
// serve it until then.

// Keys of the TLS material in a database's Secret.
const (
	keyTLSCA         = "tls-ca.pem"
	keyTLSCert       = "tls-server.crt"
	keyTLSKey        = "tls-server.key"
	keyTLSClientCert = "tls-client.crt"
	keyTLSClientKey  = "tls-client.key"
)

// annotationTLS on the pod template and its pods is tlsLive when its server serves TLS,
// "" or absent when it serves plain TCP: clouddb's own connections to a pod follow it. A
// TLS pod made before TLS files were taken live carries the digest of its files instead
// (tlsDigest), and is replaced.
const annotationTLS = "clouddb.io/tls"

// tlsLive is annotationTLS of a pod that serves TLS, with files it takes live.
const tlsLive = "live"

// annotationTLSFiles on a TLS pod is the digest of the TLS files Ensure last had its
// server load: updating it has the kubelet refresh the pod's Secret volume.
const annotationTLSFiles = "clouddb.io/tls-files"

var tlsKeys = []string{keyTLSCA, keyTLSCert, keyTLSKey, keyTLSClientCert, keyTLSClientKey}

// tlsPath is where the value of Secret key k is mounted: named after its content.
func tlsPath(k string, v []byte) string {
	sum := sha256.Sum256(v)
	base, ext, _ := strings.Cut(k, ".")
	return base + "-" + hex.EncodeToString(sum[:6]) + "." + ext
}

// tlsDigest identifies the TLS files of a Secret's data, "" when the instance has no TLS.
func tlsDigest(in clouddb.Instance, data map[string][]byte) string {
	if in.TLS == nil {
		return ""
	}
	h := sha256.New()
	for _, k := range tlsKeys {
		fmt.Fprintf(h, "%s %d\n", k, len(data[k]))
		h.Write(data[k])
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// tlsHosts are the names and addresses a client reaches the database by, which its
// server certificate names: with LoadBalancer Services, also every address of its load
// balancers (lbs: ingressEntry.all; a cluster's every node's).
func (d *Driver) tlsHosts(id int, lbs []string) []string {
	n := Name(id)
	hosts := []string{n, n + "." + d.ns, serverName(n, d.ns), serverName(n, d.ns) + ".cluster.local"}
	if d.cfg.NodeAddress != "" {
		hosts = append(hosts, d.cfg.NodeAddress)
	}
	for _, h := range lbs {
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// serverName is the name clouddb verifies a database's certificate by when it dials its
// pod by address.
func serverName(name, ns string) string { return name + "." + ns + ".svc" }

// addTLSData puts the instance's TLS material into data, the Secret's new content: the
// certificates of old (its current content) while they are usable, new ones otherwise,
// and the CA bundle of the instance's client certificates. Without TLS the old material
// is kept as it is.
func (d *Driver) addTLSData(ctx context.Context, in clouddb.Instance, old, data map[string][]byte) error {
	for _, k := range tlsKeys {
		if v, ok := old[k]; ok {
			data[k] = v
		}
	}
	if in.TLS == nil {
		return nil
	}
	if d.cfg.CA == nil {
		return fmt.Errorf("database %d: TLS needs the installation's certificate authority (Config.CA)", in.DatabaseID)
	}
	hosts := d.tlsHosts(in.DatabaseID, d.ingressHosts(ctx, in.DatabaseID).all)
	if !d.leafUsable(data[keyTLSCert], data[keyTLSKey], x509.ExtKeyUsageServerAuth, hosts) {
		cert, key, err := d.cfg.CA.IssueServer(hosts)
		if err != nil {
			return fmt.Errorf("database %d: issuing a server certificate: %w", in.DatabaseID, err)
		}
		data[keyTLSCert], data[keyTLSKey] = cert, key
		d.log.Info("issued a server certificate", "database_id", in.DatabaseID, "hosts", hosts)
	}
	if !d.leafUsable(data[keyTLSClientCert], data[keyTLSClientKey], x509.ExtKeyUsageClientAuth, nil) {
		cert, key, err := d.cfg.CA.IssueClient(fmt.Sprintf("clouddb database %d", in.DatabaseID))
		if err != nil {
			return fmt.Errorf("database %d: issuing a client certificate: %w", in.DatabaseID, err)
		}
		data[keyTLSClientCert], data[keyTLSClientKey] = cert, key
	}
	data[keyTLSCA] = d.caBundle(in)
	return nil
}

// caBundle is the tls-ca-cert-file of a TLS instance: the CA (clouddb's own client
// certificates, the nodes' to each other) and the tenant's client certificates.
func (d *Driver) caBundle(in clouddb.Instance) []byte {
	bundle := append([]byte(nil), d.cfg.CA.CertificatePEM()...)
	for _, c := range in.TLS.ClientCertificates {
		bundle = append(bundle, '\n')
		bundle = append(bundle, strings.TrimSpace(c)...)
		bundle = append(bundle, '\n')
	}
	return bundle
}

// validateTLS refuses client certificates that are not PEM certificates: redis would
// refuse the whole bundle at start, after the old pod is gone.
func validateTLS(in clouddb.Instance) error {
	if in.TLS == nil {
		return nil
	}
	for i, c := range in.TLS.ClientCertificates {
		b, rest := pem.Decode([]byte(strings.TrimSpace(c)))
		if b == nil || b.Type != "CERTIFICATE" || len(strings.TrimSpace(string(rest))) != 0 {
			return fmt.Errorf("database %d: client certificate %d is not one PEM certificate", in.DatabaseID, i+1)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return fmt.Errorf("database %d: client certificate %d: %w", in.DatabaseID, i+1, err)
		}
	}
	return nil
}

// tlsCheck is the verdict of secretTLSUsable on the certificates of a Secret's
// version: usable until then.
type tlsCheck struct {
	version string // the Secret's UID and resourceVersion
	until   time.Time
}

// secretTLSUsable reports whether the TLS material of a TLS database's Secret is what
// Ensure keeps: certificates of the CA that pki.LeafUsable finds usable (the server's
// naming every host clients use), and the instance's client certificates. When it is
// not, Running is false, and so the reconciler's Ensure renews it: a database left alone
// is renewed in time too. Running reads the same Secret at every pass: the certificates'
// verdict is kept for the Secret's version until it changes (pki.LeafUsableUntil), and
// only the CA bundle, which follows the instance, is compared each time.
func (d *Driver) secretTLSUsable(ctx context.Context, in clouddb.Instance, secret *corev1.Secret) bool {
	if d.cfg.CA == nil || string(secret.Data[keyTLSCA]) != string(d.caBundle(in)) {
		return false
	}
	// The verdict holds for the hosts it was given too: a load balancer's new address is
	// one more the certificate must name.
	hosts := d.tlsHosts(in.DatabaseID, d.ingressHosts(ctx, in.DatabaseID).all)
	version := string(secret.UID) + "/" + secret.ResourceVersion + "/" + strings.Join(hosts, ",")
	if v, ok := d.tlsChecks.Load(in.DatabaseID); ok {
		if c := v.(tlsCheck); c.version == version && time.Now().Before(c.until) {
			return true
		}
	}
	until, ok := d.leavesUsableUntil(in, secret.Data, hosts)
	if !ok {
		d.tlsChecks.Delete(in.DatabaseID)
		return false
	}
	d.tlsChecks.Store(in.DatabaseID, tlsCheck{version: version, until: until})
	return true
}

// leavesUsableUntil reports whether the server's and clouddb's client certificate of a
// TLS database's Secret data are usable, and until when both stay so.
func (d *Driver) leavesUsableUntil(in clouddb.Instance, data map[string][]byte, hosts []string) (time.Time, bool) {
	var until time.Time
	for _, leaf := range []struct {
		cert, key string
		usage     x509.ExtKeyUsage
		hosts     []string
	}{
		{keyTLSCert, keyTLSKey, x509.ExtKeyUsageServerAuth, hosts},
		{keyTLSClientCert, keyTLSClientKey, x509.ExtKeyUsageClientAuth, nil},
	} {
		u, ok := d.leafUsableUntil(data[leaf.cert], data[leaf.key], leaf.usage, leaf.hosts)
		if !ok {
			return time.Time{}, false
		}
		if until.IsZero() || u.Before(until) {
			until = u
		}
	}
	return until, true
}

// leafUsable reports whether a certificate and its key can serve on (see
// pki.LeafUsable).
func (d *Driver) leafUsable(certPEM, keyPEM []byte, usage x509.ExtKeyUsage, hosts []string) bool {
	_, ok := d.leafUsableUntil(certPEM, keyPEM, usage, hosts)
	return ok
}

// leafUsableUntil is leafUsable, and until when it stays so (pki.LeafUsableUntil).
func (d *Driver) leafUsableUntil(certPEM, keyPEM []byte, usage x509.ExtKeyUsage, hosts []string) (time.Time, bool) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return time.Time{}, false
	}
	return pki.LeafUsableUntil(pair, d.cfg.CA.CertificatePEM(), usage, hosts)
}

// tlsLines are the redis.conf lines of a pod that mounts the TLS files at paths (by
// Secret key; none: it serves plain TCP), after renderConfig's (a later "port" wins):
// client certificates required when the tenant gave any, and TLS for replication, whose
// client certificate is clouddb's.
func tlsLines(in clouddb.Instance, paths map[string]string) [][]string {
	if paths[keyTLSCert] == "" {
		return nil
	}
	auth := "no"
	if in.TLS != nil && len(in.TLS.ClientCertificates) > 0 {
		auth = "yes"
	}
	return [][]string{
		{"port", "0"},
		{"tls-port", fmt.Sprint(redisPort)},
		{"tls-cert-file", paths[keyTLSCert]},
		{"tls-key-file", paths[keyTLSKey]},
		{"tls-ca-cert-file", paths[keyTLSCA]},
		{"tls-auth-clients", auth},
		{"tls-replication", "yes"},
		{"tls-client-cert-file", paths[keyTLSClientCert]},
		{"tls-client-key-file", paths[keyTLSClientKey]},
	}
}

// keyLiveConfig is the Secret key of the redis.conf of a TLS pod, which mounts the whole
// Secret and takes new TLS files live. Not keyConfig: a plain pod, which mounts only that
// key, may run beside it while TLS is turned on or off.
const keyLiveConfig = "redis-tls-live.conf"

// isConfigKey reports whether Secret key k holds a redis.conf: keyConfig, keyLiveConfig,
// or the key a TLS pod made before TLS files were taken live reads, named after the
// digest of its files ("redis-tls-<digest>.conf", see mountedConfig: its volume's items
// name it), until it is replaced.
func isConfigKey(k string) bool {
	return k == keyConfig || strings.HasPrefix(k, "redis-tls-") && strings.HasSuffix(k, ".conf")
}

// configMount is what the config volume of a pod shows it: items of the Secret (a plain
// pod, or a TLS pod made before TLS files were taken live), or the whole Secret (whole:
// a TLS pod that takes new files live).
type configMount struct {
	items []corev1.KeyToPath
	whole bool
}

// nextMount is the config volume of the instance's next pod: the whole Secret with TLS,
// its plain redis.conf without.
func nextMount(in clouddb.Instance) configMount {
	if in.TLS != nil {
		return configMount{whole: true}
	}
	return configMount{items: []corev1.KeyToPath{{Key: keyConfig, Path: confFile}}}
}

// podMount is the config volume of a pod (spec); false when it has none.
func podMount(spec *corev1.PodSpec) (configMount, bool) {
	for _, v := range spec.Volumes {
		if v.Name == "config" && v.Secret != nil {
			return configMount{items: v.Secret.Items, whole: len(v.Secret.Items) == 0}, true
		}
	}
	return configMount{}, false
}

// mountedConfig is the Secret key and the redis.conf, the instance's, of a pod with that
// config volume, with the Secret's data: its TLS lines name the files it mounts. A pod
// that mounts the whole Secret reads the TLS files of data under their content-named
// keys (see addLiveTLSFiles); "" when data has none (nothing for it to read).
func mountedConfig(in clouddb.Instance, internal string, m configMount, data map[string][]byte) (string, []byte, error) {
	key := keyConfig
	paths := map[string]string{}
	if m.whole {
		key = keyLiveConfig
		for _, k := range tlsKeys {
			if len(data[k]) == 0 {
				return "", nil, nil
			}
			paths[k] = confDir + "/" + tlsPath(k, data[k])
		}
	}
	for _, it := range m.items {
		if it.Path == confFile {
			key = it.Key
		} else {
			paths[it.Key] = confDir + "/" + it.Path
		}
	}
	conf, err := renderConfig(in, internal)
	if err != nil {
		return "", nil, err
	}
	for _, l := range tlsLines(in, paths) {
		conf = appendLine(conf, l[0], l[1:]...)
	}
	return key, conf, nil
}

// addLiveTLSFiles puts the TLS files of data under their content-named keys too, where
// a pod that mounts the whole Secret reads them. The files of before go: a running server
// holds what it loaded, and a pod's volume shows the new config with the new files (the
// kubelet swaps a mounted Secret's files all at once).
func addLiveTLSFiles(data map[string][]byte) {
	for _, k := range tlsKeys {
		if v := data[k]; len(v) > 0 {
			data[tlsPath(k, v)] = v
		}
	}
}

// podConfig is the Secret key and the redis.conf of the instance's next pod, with the
// TLS files of the Secret's data.
func podConfig(in clouddb.Instance, internal string, data map[string][]byte) (string, []byte, error) {
	if in.TLS != nil {
		for _, k := range tlsKeys {
			if len(data[k]) == 0 {
				return "", nil, fmt.Errorf("database %d: its secret has no %s", in.DatabaseID, k)
			}
		}
	}
	return mountedConfig(in, internal, nextMount(in), data)
}

// configAsAsked reports whether the Secret's data holds the redis.conf of the instance's
// next pod.
func configAsAsked(in clouddb.Instance, internal string, data map[string][]byte) bool {
	key, conf, err := podConfig(in, internal, data)
	return err == nil && string(data[key]) == string(conf)
}

// tlsAnnotation is annotationTLS of the instance's pods: tlsLive with TLS, "" without.
func tlsAnnotation(in clouddb.Instance) string {
	if in.TLS != nil {
		return tlsLive
	}
	return ""
}

// withTLS has the pods of sts, the instance's StatefulSet as statefulSet makes it, mount
// and read their redis.conf as nextMount says, and marks their template with
// tlsAnnotation.
func withTLS(sts *appsv1.StatefulSet, in clouddb.Instance) {
	t := &sts.Spec.Template
	m := nextMount(in)
	for i := range t.Spec.Volumes {
		if s := t.Spec.Volumes[i].Secret; s != nil && t.Spec.Volumes[i].Name == "config" {
			s.Items = m.items
		}
	}
	if in.TLS == nil {
		return
	}
	t.Spec.Containers[0].Command = serverCommand(keyLiveConfig)
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	t.Annotations[annotationTLS] = tlsLive
}

// tlsFileSettings are the tls-* settings of the servers of a pod that mounts the whole
// Secret that change with the Secret's data: the files by their content-named keys, and
// whether clients must present a certificate. Ensure sets them live in one CONFIG SET, in
// this order.
func tlsFileSettings(in clouddb.Instance, data map[string][]byte) [][2]string {
	path := func(k string) string { return confDir + "/" + tlsPath(k, data[k]) }
	auth := "no"
	if len(in.TLS.ClientCertificates) > 0 {
		auth = "yes"
	}
	return [][2]string{
		{"tls-cert-file", path(keyTLSCert)},
		{"tls-key-file", path(keyTLSKey)},
		{"tls-ca-cert-file", path(keyTLSCA)},
		{"tls-client-cert-file", path(keyTLSClientCert)},
		{"tls-client-key-file", path(keyTLSClientKey)},
		{"tls-auth-clients", auth},
	}
}

// tlsServed reports whether the server of c runs with the settings.
func tlsServed(ctx context.Context, c *redis.Client, want [][2]string) (bool, error) {
	got, err := c.ConfigGet(ctx, "tls-*").Result()
	if err != nil {
		return false, fmt.Errorf("CONFIG GET tls-*: %w", err)
	}
	for _, s := range want {
		if got[s[0]] != s[1] {
			return false, nil
		}
	}
	return true, nil
}

// applyTLSFiles has the servers of pods (each reached by its client in clients), which
// mount the whole Secret, serve the TLS files of the Secret (see the top of this file),
// waiting up to StartTimeout for the pods to show them; then the error wraps
// ErrServerStarting. The pods are all told first, so that the kubelet refreshes their
// volumes together. Connections open meanwhile stay as they were made.
func (d *Driver) applyTLSFiles(ctx context.Context, in clouddb.Instance, pods []*corev1.Pod, clients []*redis.Client, secret *corev1.Secret) error {
	want := tlsFileSettings(in, secret.Data)
	digest := tlsDigest(in, secret.Data)
	var stale []int
	for i, pod := range pods {
		ok, err := tlsServed(ctx, clients[i], want)
		if err != nil {
			return fmt.Errorf("database %d: pod %s: %w", in.DatabaseID, pod.Name, err)
		}
		if ok {
			continue
		}
		stale = append(stale, i)
		if pod.Annotations[annotationTLSFiles] == digest {
			continue
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, annotationTLSFiles, digest)
		if _, err = d.cfg.Client.CoreV1().Pods(d.ns).Patch(ctx, pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("database %d: pod %s: annotating it with its TLS files: %w", in.DatabaseID, pod.Name, err)
		}
	}
	args := []any{"config", "set"}
	for _, s := range want {
		args = append(args, s[0], s[1])
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	for _, i := range stale {
		if err := loadTLSFiles(wctx, clients[i], args); err != nil {
			if ctx.Err() == nil && wctx.Err() != nil {
				err = fmt.Errorf("its pod does not show the secret's new TLS files after %v (%v): %w", d.cfg.StartTimeout, err, clouddb.ErrServerStarting)
			}
			return fmt.Errorf("database %d: pod %s: %w", in.DatabaseID, pods[i].Name, err)
		}
		d.log.Info("a database's server loaded new TLS files", "database_id", in.DatabaseID, "pod", pods[i].Name,
			"after", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// tlsFilesServed reports whether the server of c, a TLS pod's, serves the TLS files of
// the Secret; true without TLS. A failed read is logged and reported false: Ensure
// applies them again.
func (d *Driver) tlsFilesServed(ctx context.Context, c *redis.Client, in clouddb.Instance, secret *corev1.Secret) (bool, error) {
	if in.TLS == nil {
		return true, nil
	}
	ok, err := tlsServed(ctx, c, tlsFileSettings(in, secret.Data))
	if err != nil {
		d.log.Warn("a database's pod is ready but its TLS settings cannot be read", "database_id", in.DatabaseID, "error", err)
	}
	return ok, nil
}

// loadTLSFiles runs the CONFIG SET of args on c until it succeeds: redis refuses it,
// changing nothing, while a file it names is not there yet.
func loadTLSFiles(ctx context.Context, c *redis.Client, args []any) error {
	for {
		err := c.Do(ctx, args...).Err()
		if err == nil {
			return nil
		}
		var rerr redis.Error
		if !errors.As(err, &rerr) {
			return fmt.Errorf("CONFIG SET tls-*: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CONFIG SET tls-*: %w", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// podTLS is how clouddb's own connections reach the pod: nil when its server serves plain
// TCP, else TLS verified against the installation's CA by the Service's name (the pod is
// dialled by address), with clouddb's client certificate of the Secret.
func (d *Driver) podTLS(pod *corev1.Pod, secret *corev1.Secret) (*tls.Config, error) {
	if pod.Annotations[annotationTLS] == "" {
		return nil, nil
	}
	if d.cfg.CA == nil {
		return nil, errors.New("the database serves TLS and the driver has no certificate authority (Config.CA)")
	}
	pair, err := tls.X509KeyPair(secret.Data[keyTLSClientCert], secret.Data[keyTLSClientKey])
	if err != nil {
		return nil, fmt.Errorf("clouddb's client certificate in secret %s: %w", secret.Name, err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(d.cfg.CA.CertificatePEM())
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, Certificates: []tls.Certificate{pair},
		ServerName: serverName(secret.Name, d.ns)}, nil
}
