package kubernetes

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"clouddb"
	"clouddb/internal/pki"
)

// TLS. A database with TLS serves its port with TLS only (port 0, tls-port), with a
// server certificate of Config.CA for the names a client reaches it by (the node address
// of its NodePort, its Service's DNS names). The material lives in the database's Secret
// and is mounted read-only with its redis.conf: the CA bundle (the CA, so that clouddb's
// own client certificate is accepted, and the tenant's client certificates, required when
// there is any), the server's certificate and key, and the client certificate clouddb
// presents. A pod's volumes are fixed at its creation and the kubelet refreshes a mounted
// Secret only after a minute or more, so the mounted files are named after their content
// and the pod template carries a digest of them (annotationTLS), as does the Secret key of
// the redis.conf that names them (configKey): any change of TLS (on, off, new client
// certificates, a renewed certificate) is a new pod, which Ensure makes with the data
// kept (see settle; a replicated database's nodes one at a time, see renewNodes). The
// material stays in the Secret while TLS is off, for the pods that still serve it until
// then. An OSS Cluster's nodes take new TLS files without a new pod instead (see
// cluster_tls.go).

// Keys of the TLS material in a database's Secret.
const (
	keyTLSCA         = "tls-ca.pem"
	keyTLSCert       = "tls-server.crt"
	keyTLSKey        = "tls-server.key"
	keyTLSClientCert = "tls-client.crt"
	keyTLSClientKey  = "tls-client.key"
)

// annotationTLS on the pod template is the digest of the TLS files the pod's server
// serves with, "" or absent when it serves plain TCP: clouddb's own connections to a pod
// follow it. A cluster's pods, which take new TLS files live, carry tlsLive instead (see
// cluster_tls.go).
const annotationTLS = "clouddb.io/tls"

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
// server certificate names.
func (d *Driver) tlsHosts(id int) []string {
	n := Name(id)
	hosts := []string{n, n + "." + d.ns, serverName(n, d.ns), serverName(n, d.ns) + ".cluster.local"}
	if d.cfg.NodeAddress != "" {
		hosts = append(hosts, d.cfg.NodeAddress)
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
func (d *Driver) addTLSData(in clouddb.Instance, old, data map[string][]byte) error {
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
	if !d.leafUsable(data[keyTLSCert], data[keyTLSKey], x509.ExtKeyUsageServerAuth, d.tlsHosts(in.DatabaseID)) {
		cert, key, err := d.cfg.CA.IssueServer(d.tlsHosts(in.DatabaseID))
		if err != nil {
			return fmt.Errorf("database %d: issuing a server certificate: %w", in.DatabaseID, err)
		}
		data[keyTLSCert], data[keyTLSKey] = cert, key
		d.log.Info("issued a server certificate", "database_id", in.DatabaseID, "hosts", d.tlsHosts(in.DatabaseID))
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

// tlsUsable reports whether the TLS material of a TLS database's Secret data is what
// Ensure keeps: certificates of the CA that pki.LeafUsable finds usable (the server's
// naming every host clients use), and the instance's client certificates. When it is
// not, Running is false, and so the reconciler's Ensure renews it: a database left alone
// is renewed in time too.
func (d *Driver) tlsUsable(in clouddb.Instance, data map[string][]byte) bool {
	return d.cfg.CA != nil &&
		d.leafUsable(data[keyTLSCert], data[keyTLSKey], x509.ExtKeyUsageServerAuth, d.tlsHosts(in.DatabaseID)) &&
		d.leafUsable(data[keyTLSClientCert], data[keyTLSClientKey], x509.ExtKeyUsageClientAuth, nil) &&
		string(data[keyTLSCA]) == string(d.caBundle(in))
}

// leafUsable reports whether a certificate and its key can serve on (see
// pki.LeafUsable).
func (d *Driver) leafUsable(certPEM, keyPEM []byte, usage x509.ExtKeyUsage, hosts []string) bool {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	return err == nil && pki.LeafUsable(pair, d.cfg.CA.CertificatePEM(), usage, hosts)
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

// configKey is the Secret key of the redis.conf of the pods whose TLS files have that
// digest ("": none). A key per digest, not one redis.conf for all: the Secret changes
// before the pods do, and a pod that restarts meanwhile must find the config made for
// the files it mounts (a pod without them would crash-loop on a TLS config).
func configKey(digest string) string {
	if digest == "" {
		return keyConfig
	}
	return "redis-tls-" + digest + ".conf"
}

// isConfigKey reports whether Secret key k holds a redis.conf.
func isConfigKey(k string) bool {
	return k == keyConfig || strings.HasPrefix(k, "redis-tls-") && strings.HasSuffix(k, ".conf")
}

// configItems are the items of the config volume of the instance's pods, with the
// Secret's data: the redis.conf of their TLS digest, and the TLS files named after their
// content.
func configItems(in clouddb.Instance, data map[string][]byte) []corev1.KeyToPath {
	digest := tlsDigest(in, data)
	items := []corev1.KeyToPath{{Key: configKey(digest), Path: confFile}}
	if digest != "" {
		for _, k := range tlsKeys {
			items = append(items, corev1.KeyToPath{Key: k, Path: tlsPath(k, data[k])})
		}
	}
	return items
}

// configVolumeItems are the items of the config volume of a pod (spec): what it reads.
func configVolumeItems(spec *corev1.PodSpec) []corev1.KeyToPath {
	for _, v := range spec.Volumes {
		if v.Name == "config" && v.Secret != nil {
			return v.Secret.Items
		}
	}
	return nil
}

// mountedConfig is the Secret key and the redis.conf, the instance's, of a pod whose
// config volume has these items: its TLS lines name the files it mounts.
func mountedConfig(in clouddb.Instance, internal string, items []corev1.KeyToPath) (string, []byte, error) {
	key := keyConfig
	paths := map[string]string{}
	for _, it := range items {
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
	return mountedConfig(in, internal, configItems(in, data))
}

// configAsAsked reports whether the Secret's data holds the redis.conf of the instance's
// next pod.
func configAsAsked(in clouddb.Instance, internal string, data map[string][]byte) bool {
	key, conf, err := podConfig(in, internal, data)
	return err == nil && string(data[key]) == string(conf)
}

// withTLS mounts the redis.conf and the TLS files of the Secret's data into the pods of
// sts, the instance's StatefulSet as renderConfig's, and marks its template with their
// digest.
func withTLS(sts *appsv1.StatefulSet, in clouddb.Instance, data map[string][]byte) {
	t := &sts.Spec.Template
	for i := range t.Spec.Volumes {
		if s := t.Spec.Volumes[i].Secret; s != nil && t.Spec.Volumes[i].Name == "config" {
			s.Items = configItems(in, data)
		}
	}
	digest := tlsDigest(in, data)
	if digest == "" {
		return
	}
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	t.Annotations[annotationTLS] = digest
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
