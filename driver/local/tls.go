package local

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"clouddb"
	"clouddb/internal/pki"
)

// TLS. A database with TLS serves its port with TLS only (port 0, tls-port), with a
// server certificate issued by the installation's CA for the names a client reaches this
// machine by. Its tls-ca-cert-file is a bundle: the CA (so the client certificate the
// server itself presents as a replica, and clouddb's own, are accepted) and the tenant's
// client certificates, which a client must present when there are any
// (tls-auth-clients). Everything switches live with CONFIG SET: redis 7.0 takes
// "port 0 tls-port P" and back in one command (the closing port first, see setOrder), and
// reloads the certificates when a tls-* file setting is set (7.0.15 does so even for an
// unchanged path, but nothing promises it). Files are named after their content, so that
// a new certificate changes the setting's value, which the drift check compares and no
// redis can skip; stale ones are removed once the server no longer names them.

// tlsPrefix starts the name of every TLS file in a database's directory.
const tlsPrefix = "tls-"

// tlsFiles are the certificate files of a database's server.
type tlsFiles struct {
	Cert, Key             string // its server certificate
	ClientCert, ClientKey string // the client certificate it presents as a replica
}

// tlsHosts are the names and addresses a client may reach this machine's servers by,
// which the server certificates name: the bind address (every address of the machine
// when it is unspecified), the loopback names and the host name.
func tlsHosts(host, connectHost string) []string {
	hosts := []string{connectHost, "localhost", "127.0.0.1", "::1"}
	if a, err := netip.ParseAddr(host); err == nil && a.IsUnspecified() {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if p, err := netip.ParsePrefix(a.String()); err == nil && !p.Addr().IsLinkLocalUnicast() {
					hosts = append(hosts, p.Addr().String())
				}
			}
		}
	} else {
		hosts = append(hosts, host)
	}
	if name, err := os.Hostname(); err == nil && name != "" {
		hosts = append(hosts, name)
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// caBundle is the content of a TLS database's tls-ca-cert-file.
func (d *Driver) caBundle(in clouddb.Instance) []byte {
	b := append([]byte(nil), d.ca.CertificatePEM()...)
	for _, c := range in.TLS.ClientCertificates {
		b = append(b, '\n')
		b = append(b, strings.TrimSpace(c)...)
		b = append(b, '\n')
	}
	return b
}

// contentName is the file name of data of a kind: tls-<kind>-<sha256 prefix>.<ext>.
func contentName(kind, ext string, data []byte) string {
	sum := sha256.Sum256(data)
	return tlsPrefix + kind + "-" + hex.EncodeToString(sum[:8]) + "." + ext
}

// knownTLS are the certificate files the database's server was last given: those this
// Driver chose, else those its config file names.
func (d *Driver) knownTLS(id int) tlsFiles {
	d.mu.Lock()
	f, ok := d.tlsFiles[id]
	d.mu.Unlock()
	if ok {
		return f
	}
	// The nodes of a database share its files (in the database's directory).
	for _, n := range d.nodes(id) {
		if c, ok, err := d.readConfig(n); err == nil && ok && c.TLSFiles.Cert != "" {
			return c.TLSFiles
		}
	}
	return tlsFiles{}
}

// prepareTLS writes the TLS files the instance's server needs into its directory: the
// CA bundle, and server and client certificates, issued anew when those it has are not
// usable (missing, from another CA, near their end, or not naming every host).
func (d *Driver) prepareTLS(in clouddb.Instance) error {
	id := in.DatabaseID
	dir := d.dbDir(id)
	bundle := d.caBundle(in)
	if err := writeIfAbsent(filepath.Join(dir, contentName("ca", "pem", bundle)), bundle); err != nil {
		return err
	}
	cur := d.knownTLS(id)
	f := cur
	if !d.leafUsable(cur.Cert, cur.Key, x509.ExtKeyUsageServerAuth) {
		cert, key, err := d.ca.IssueServer(d.tlsHosts)
		if err != nil {
			return fmt.Errorf("issue a server certificate: %w", err)
		}
		if f.Cert, f.Key, err = writePair(dir, "server", cert, key); err != nil {
			return err
		}
		d.log.Info("issued a server certificate", keyDatabase, id, "hosts", d.tlsHosts)
	}
	if !d.leafUsable(cur.ClientCert, cur.ClientKey, x509.ExtKeyUsageClientAuth) {
		cert, key, err := d.ca.IssueClient(fmt.Sprintf("clouddb database %d", id))
		if err != nil {
			return fmt.Errorf("issue a client certificate: %w", err)
		}
		if f.ClientCert, f.ClientKey, err = writePair(dir, "client", cert, key); err != nil {
			return err
		}
	}
	d.mu.Lock()
	d.tlsFiles[id] = f
	d.mu.Unlock()
	return nil
}

// leafUsable reports whether the certificate file certPath and its key keyPath can serve
// on (see pki.LeafUsable): a server's names every host of tlsHosts.
func (d *Driver) leafUsable(certPath, keyPath string, usage x509.ExtKeyUsage) bool {
	_, ok := d.leafUntil(certPath, keyPath, usage)
	return ok
}

// leafUntil is leafUsable, and when the certificate is usable, until when it stays so
// (see pki.LeafUsableUntil).
func (d *Driver) leafUntil(certPath, keyPath string, usage x509.ExtKeyUsage) (time.Time, bool) {
	if certPath == "" || keyPath == "" {
		return time.Time{}, false
	}
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return time.Time{}, false
	}
	var hosts []string
	if usage == x509.ExtKeyUsageServerAuth {
		hosts = d.tlsHosts
	}
	return pki.LeafUsableUntil(pair, d.ca.CertificatePEM(), usage, hosts)
}

// Renewal. Ensure issues a certificate anew once it is no longer usable (see
// prepareTLS), and the running server takes the new files live; but the reconciler runs
// Ensure only when Running is false. So Running is false, for a TLS database, when the
// files its server was last given are no longer usable: a database nobody changes has its
// certificates renewed in time too, while clouddb keeps running. Checking a pair reads
// and verifies it, some 150 µs: too much at every Running of every database, so
// tlsCurrent remembers until when the files stay usable (a file is named after its
// content, and the Driver's CA and hosts do not change), and every deepCheckEvery only
// compares the files' stat with what it checked, so that files replaced or removed
// behind clouddb's back (which a restarted server would read) are looked at again.

// tlsCheck is what tlsCurrent last found of a database's TLS files.
type tlsCheck struct {
	files tlsFiles
	stat  []fileStamp // of files' four, in tlsFiles order
	until time.Time   // when the first of them needs renewal
	at    time.Time   // when the stat was last compared
}

// fileStamp identifies a file's content as far as its stat tells.
type fileStamp struct{ size, mtime int64 }

// stampTLS stats the files of f.
func stampTLS(f tlsFiles) ([]fileStamp, error) {
	paths := []string{f.Cert, f.Key, f.ClientCert, f.ClientKey}
	out := make([]fileStamp, len(paths))
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		out[i] = fileStamp{fi.Size(), fi.ModTime().UnixNano()}
	}
	return out, nil
}

// tlsCurrent reports whether the TLS files the database's server was last given are
// still usable (see leafUsable): false when one needs renewal. The caller holds the
// database's lock.
func (d *Driver) tlsCurrent(id int) bool {
	now := time.Now()
	d.mu.Lock()
	last, checked := d.tlsChecks[id]
	f, known := d.tlsFiles[id]
	d.mu.Unlock()
	if checked && (!known || f == last.files) && now.Before(last.until) {
		if now.Sub(last.at) < deepCheckEvery {
			return true
		}
		if stat, err := stampTLS(last.files); err == nil && slices.Equal(stat, last.stat) {
			last.at = now
			d.mu.Lock()
			d.tlsChecks[id] = last
			d.mu.Unlock()
			return true
		}
	}
	if !known {
		f = d.knownTLS(id)
	}
	// The stat before the read: a file replaced in between is looked at again.
	stat, err := stampTLS(f)
	until, ok := d.leafUntil(f.Cert, f.Key, x509.ExtKeyUsageServerAuth)
	clientUntil, clientOK := d.leafUntil(f.ClientCert, f.ClientKey, x509.ExtKeyUsageClientAuth)
	ok = ok && clientOK
	if clientUntil.Before(until) {
		until = clientUntil
	}
	d.mu.Lock()
	if err != nil || !ok {
		delete(d.tlsChecks, id)
	} else {
		d.tlsChecks[id] = tlsCheck{files: f, stat: stat, until: until, at: now}
	}
	d.mu.Unlock()
	if err != nil || !ok {
		d.log.Info("the server's TLS certificates need renewal", keyDatabase, id)
		return false
	}
	return true // leafUntil's until is not before now
}

// writePair writes a certificate and its key, named after the certificate, mode 0600.
func writePair(dir, kind string, cert, key []byte) (certPath, keyPath string, err error) {
	name := contentName(kind, "pem", cert)
	certPath = filepath.Join(dir, name)
	keyPath = strings.TrimSuffix(certPath, ".pem") + ".key"
	if err = writeFileAtomic(keyPath, key, 0o600); err != nil {
		return "", "", err
	}
	if err = writeFileAtomic(certPath, cert, 0o600); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// writeIfAbsent writes a content-named file, mode 0600, unless it is there.
func writeIfAbsent(path string, data []byte) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	return writeFileAtomic(path, data, 0o600)
}

// pruneTLS removes the TLS files of the database's directory that c does not name: the
// server, which read them when it was given them, has its new ones.
func (d *Driver) pruneTLS(id int, c serverConfig) {
	dir := d.dbDir(id)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	keep := []string{c.TLSCA, c.TLSFiles.Cert, c.TLSFiles.Key, c.TLSFiles.ClientCert, c.TLSFiles.ClientKey}
	if !c.TLS {
		// Without TLS the server names none; the files this Driver prepared stay for
		// the next time TLS turns on only if they are still what it knows.
		keep = nil
		d.mu.Lock()
		delete(d.tlsFiles, id)
		delete(d.tlsChecks, id)
		d.mu.Unlock()
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if !strings.HasPrefix(e.Name(), tlsPrefix) || !e.Type().IsRegular() || slices.Contains(keep, path) {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.log.Warn("cannot remove a stale TLS file", keyDatabase, id, "error", err)
		}
	}
}

// tlsKey identifies the instance's TLS settings, for the deep check's cache.
func tlsKey(in clouddb.Instance) string {
	if in.TLS == nil {
		return ""
	}
	h := sha256.New()
	for _, c := range in.TLS.ClientCertificates {
		fmt.Fprintf(h, "%d\n%s", len(c), c)
	}
	return "tls:" + hex.EncodeToString(h.Sum(nil))
}

// sourceTLS is how TLS sources (rediss://) are verified: the system's roots and the
// installation's CA, so that another clouddb database's public TLS endpoint is a source
// like any other.
func (d *Driver) sourceTLS() *tls.Config {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if d.ca != nil {
		roots.AppendCertsFromPEM(d.ca.CertificatePEM())
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
}

// pemCertificates counts the certificates of a PEM text (for validate).
func pemCertificates(text string) int {
	n := 0
	rest := []byte(text)
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return n
		}
		if b.Type == "CERTIFICATE" {
			n++
		}
	}
}
