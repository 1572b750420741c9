package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"clouddb"
	"clouddb/sqlite"
)

// keyFile is where the encryption key lives when CLOUDDB_ENCRYPTION_KEY is not set.
const keyFile = "encryption.key"

// loadCipher returns the cipher for secrets at rest: the key comes from
// CLOUDDB_ENCRYPTION_KEY, else from <data-dir>/encryption.key, which the first start
// creates with mode 0600. A key file others can read is refused, as ssh refuses such keys.
func loadCipher(dataDir string) (*clouddb.Cipher, error) {
	text, ok := os.LookupEnv("CLOUDDB_ENCRYPTION_KEY")
	if !ok {
		path := filepath.Join(dataDir, keyFile)
		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			text = clouddb.NewKey()
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return nil, fmt.Errorf("create %s: %w", path, err)
			}
			if _, err := f.WriteString(text + "\n"); err != nil {
				f.Close()
				return nil, err
			}
			if err := f.Close(); err != nil {
				return nil, err
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
			return nil, fmt.Errorf("CLOUDDB_ENCRYPTION_KEY: %w", err)
		}
		return nil, fmt.Errorf("%s: %w", filepath.Join(dataDir, keyFile), err)
	}
	return clouddb.NewCipher(key)
}

// openStore opens the state in the data dir with its secrets sealed.
func openStore(dataDir string) (*sqlite.DB, error) {
	db, _, err := openState(dataDir)
	return db, err
}

// openState opens the state in the data dir and returns the cipher that seals its
// secrets, for the other stores of the service (the browser API's).
func openState(dataDir string) (*sqlite.DB, *clouddb.Cipher, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, nil, err
	}
	c, err := loadCipher(dataDir)
	if err != nil {
		return nil, nil, err
	}
	db, err := sqlite.Open(filepath.Join(dataDir, "clouddb.db"), sqlite.WithCipher(c))
	if err != nil {
		return nil, nil, fmt.Errorf("open store: %w", err)
	}
	return db, c, nil
}
