package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"clouddb"
)

// keyFile is where the encryption key lives when CLOUDDB_ENCRYPTION_KEY is not set.
const keyFile = "encryption.key"

// envKey is the environment variable that holds the encryption key. It has no flag twin:
// a key on a command line is visible to every user of the machine.
const envKey = "CLOUDDB_ENCRYPTION_KEY"

// envEncryptionKey reads CLOUDDB_ENCRYPTION_KEY. Set but empty is an error, not "unset":
// a secret that failed to reach the environment must not make clouddb fall back to a
// key file of its own.
func envEncryptionKey() (string, error) { return lookupEncryptionKey(os.LookupEnv) }

// lookupEncryptionKey is envEncryptionKey with the environment read through lookup.
func lookupEncryptionKey(lookup func(string) (string, bool)) (string, error) {
	v, ok := lookup(envKey)
	if ok && strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("%s is set but empty: give the key, or unset it to use %s in the data dir", envKey, keyFile)
	}
	return v, nil
}

// loadCipher returns the cipher for secrets at rest: the key is envText (the value of
// CLOUDDB_ENCRYPTION_KEY) when set, else the one in <data-dir>/encryption.key, which is
// created with mode 0600 when generate allows. A key file others can read is refused, as
// ssh refuses such keys.
func loadCipher(dataDir, envText string, generate bool) (*clouddb.Cipher, error) {
	text, ok := envText, envText != ""
	if !ok {
		path := filepath.Join(dataDir, keyFile)
		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist) && !generate:
			return nil, fmt.Errorf("a shared store needs the same encryption key on every replica: set %s (32 random bytes in base64, e.g. `openssl rand -base64 32`) or put it in %s in the data dir", envKey, keyFile)
		case errors.Is(err, fs.ErrNotExist):
			text = clouddb.NewKey()
			f, createErr := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if createErr != nil {
				return nil, fmt.Errorf("create %s: %w", path, createErr)
			}
			if _, werr := f.WriteString(text + "\n"); werr != nil {
				_ = f.Close()
				return nil, werr
			}
			if cerr := f.Close(); cerr != nil {
				return nil, cerr
			}
		case err != nil:
			return nil, err
		default:
			fi, err := os.Stat(path)
			if err != nil {
				return nil, err
			}
			if fi.Mode().Perm()&0o077 != 0 {
				return nil, fmt.Errorf("%s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
			}
			text = string(b)
		}
	}
	key, err := clouddb.ParseKey(text)
	if err != nil {
		if ok {
			return nil, fmt.Errorf("%s: %w", envKey, err)
		}
		return nil, fmt.Errorf("%s: %w", filepath.Join(dataDir, keyFile), err)
	}
	return clouddb.NewCipher(key)
}
