package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// TestSecretsAtRest writes known secrets through the API, then searches the SQLite file,
// its WAL and the service's logs for them and finds nothing; cloud-account secrets appear
// in no response either.
func TestSecretsAtRest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startService(t, dir, options{})
	ctx := testContext(t)
	creds := readCredentials(t, dir)

	const (
		dbPassword    = "Db-Pass-4d9c1e77"
		accessKeyID   = "AKIAKNOWNKEY8F2A"
		accessSecret  = "aws-Secret-77b3e0aa"
		consolePasswd = "Console-Pass-91fd"
	)
	task, err := s.c.CreateCloudAccount(ctx, client.CreateCloudAccount{
		Name: client.Ptr("aws"), Provider: client.Ptr("AWS"), AccessKeyID: client.Ptr(accessKeyID), AccessSecretKey: client.Ptr(accessSecret),
		ConsoleUsername: client.Ptr("ops"), ConsolePassword: client.Ptr(consolePasswd), SignInLoginURL: client.Ptr("https://signin.example/console"),
	})
	require.NoError(t, err)
	done, err := s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	caID := done.ResourceID()
	subID, _ := s.activeSubscription(ctx, "sec", 0.1)
	dbID := s.createDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("secret"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr(dbPassword)})
	_, err = s.c.WaitForDatabaseStatus(ctx, subID, dbID, "active")
	require.NoError(t, err)
	const userPassword = "User.pa55-7e1b0c"
	s.completed(ctx)(s.c.CreateRole(ctx, client.CreateRole{Name: client.Ptr("sec-role"), RedisRules: []client.RoleRule{
		{RuleName: "Read-Only", Databases: []client.RoleDatabase{{SubscriptionID: subID, DatabaseID: dbID}}},
	}}))
	userID := s.completed(ctx)(s.c.CreateUser(ctx, client.CreateUser{Name: client.Ptr("sec-user"), Role: client.Ptr("sec-role"), Password: client.Ptr(userPassword)}))
	_, err = s.c.WaitForUserStatus(ctx, userID, client.ACLActive)
	require.NoError(t, err)

	// The access key id reads back as sent: it names the key, Terraform keeps it.
	ca, err := s.c.GetCloudAccount(ctx, caID)
	require.NoError(t, err)
	require.Equal(t, accessKeyID, ca.AccessKeyID)

	// No response holds a cloud account's secrets or an ACL user's password.
	raw := func(path string) string {
		req, rerr := http.NewRequestWithContext(ctx, http.MethodGet, s.c.BaseURL()+path, nil)
		require.NoError(t, rerr)
		req.Header.Set("x-api-key", creds.APIKey)
		req.Header.Set("x-api-secret-key", creds.SecretKey)
		resp, rerr := http.DefaultClient.Do(req)
		require.NoError(t, rerr)
		defer resp.Body.Close()
		b, rerr := io.ReadAll(resp.Body)
		require.NoError(t, rerr)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		return string(b)
	}
	tasks, err := json.Marshal(must(s.c.ListTasks(ctx)))
	require.NoError(t, err)
	for _, body := range []string{raw("/cloud-accounts"), raw("/cloud-accounts/" + strconv.Itoa(caID)), raw("/tasks"), string(tasks), raw("/logs"),
		raw("/acl/users"), raw("/acl/users/" + strconv.Itoa(userID)), raw("/acl/roles")} {
		for _, secret := range []string{accessSecret, consolePasswd, userPassword} {
			require.NotContains(t, body, secret)
		}
	}

	// The installation CA's private key is sealed: read it as serve does, then look for
	// its body (the base64 of its DER) below.
	cipher, err := loadCipher(dir, "", true)
	require.NoError(t, err)
	installCA, err := loadCA(ctx, s.m.Store, cipher)
	require.NoError(t, err)
	caKey := strings.Join(strings.Split(strings.TrimSpace(string(installCA.KeyPEM())), "\n")[1:2], "")
	require.Len(t, caKey, 64)

	// Nothing in the state files or the logs.
	for _, f := range []string{"clouddb.db", "clouddb.db-wal"} {
		b, readErr := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, readErr)
		for _, secret := range []string{dbPassword, accessKeyID, accessSecret, consolePasswd, creds.SecretKey, userPassword, caKey} {
			require.NotContains(t, string(b), secret, "%s holds a secret in plain text", f)
		}
	}
	logs := s.logs.String()
	require.NotEmpty(t, logs)
	for _, secret := range []string{dbPassword, accessKeyID, accessSecret, consolePasswd, creds.SecretKey, userPassword, caKey} {
		if i := strings.Index(logs, secret); i >= 0 {
			t.Errorf("the logs hold a secret: …%s…", logs[max(0, i-200):i])
		}
	}

	fi, err := os.Stat(filepath.Join(dir, keyFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// TestEncryptionKey: a key file others can read is refused; CLOUDDB_ENCRYPTION_KEY is
// used when set; a shared store does not make a key of its own; a wrong key cannot open
// an existing data dir, and says so.
func TestEncryptionKey(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, keyFile), []byte(strings.Repeat("ab", 32)), 0o644))
	_, err := loadCipher(dir, "", true)
	require.ErrorContains(t, err, "chmod 600")

	_, err = loadCipher(t.TempDir(), "too-short", true)
	require.ErrorContains(t, err, "CLOUDDB_ENCRYPTION_KEY")

	empty := t.TempDir()
	c, err := loadCipher(empty, strings.Repeat("cd", 32), true)
	require.NoError(t, err)
	require.NotNil(t, c)
	_, err = os.Stat(filepath.Join(empty, keyFile))
	require.True(t, os.IsNotExist(err), "with the env key no key file is written")

	_, err = loadCipher(empty, "", false)
	require.ErrorContains(t, err, "CLOUDDB_ENCRYPTION_KEY", "a shared store asks for the key")
	_, err = os.Stat(filepath.Join(empty, keyFile))
	require.True(t, os.IsNotExist(err), "a shared store never makes a key file")

	// A data dir with secrets sealed under one key refuses to start under another.
	data := t.TempDir()
	s := startService(t, data, options{key: strings.Repeat("01", 32)})
	ctx := testContext(t)
	s.activeSubscription(ctx, "sealed", 0.1)
	s.stop()
	m := NewMain(io.Discard, io.Discard)
	m.Config = s.m.Config
	m.Config.EncryptionKey = strings.Repeat("02", 32)
	err = m.Run(ctx)
	require.ErrorContains(t, err, "encryption key")
	require.ErrorContains(t, err, "CLOUDDB_ENCRYPTION_KEY")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
