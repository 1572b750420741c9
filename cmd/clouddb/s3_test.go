package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
	"clouddb/internal/s3test"
)

// TestBackupImportS3: a database backed up to an S3-compatible server through
// remoteBackup, and the backup imported from there into another database (sourceType
// aws-s3), key for key. The S3 server is gofakes3 on loopback, checking credentials.
func TestBackupImportS3(t *testing.T) {
	t.Parallel()
	s3 := s3test.Start(t, nil, "backups")
	creds := s3.AccessKey + ":" + url.QueryEscape(s3.SecretKey)
	dest := "s3://" + creds + "@" + s3.HostPort + "/backups/nightly"

	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	subID, _ := s.activeSubscription(ctx, "s3", 1)
	src := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("src"), MemoryLimitInGB: client.Ptr(0.2), Password: client.Ptr("pw-src"),
		RemoteBackup: &client.RemoteBackup{Active: client.Ptr(true), Interval: client.Ptr("every-12-hours"), TimeUTC: client.Ptr("03:30"),
			StorageType: client.Ptr("aws-s3"), StoragePath: client.Ptr(dest)}})
	dst := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("dst"), MemoryLimitInGB: client.Ptr(0.2), Password: client.Ptr("pw-dst")})
	require.Equal(t, &client.Backup{EnableRemoteBackup: true, Interval: "every-12-hours", TimeUTC: "03:30", Destination: dest}, src.Backup,
		"GET shows the remoteBackup settings as the response's backup object")
	rs := redisOf(t, src)
	fillEveryType(t, rs, "s3", 300)

	task, err := s.c.BackupDatabase(ctx, subID, src.ID)
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	objects, err := s3.Backend.ListBucket("backups", &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
	require.NoError(t, err)
	require.Len(t, objects.Contents, 1)
	key := objects.Contents[0].Key
	require.True(t, strings.HasPrefix(key, "nightly/src-"), key)

	// The location is reported without the secret key.
	var st operationStatus
	statusTask, err := s.c.BackupStatus(ctx, subID, src.ID)
	require.NoError(t, err)
	done, err := s.c.WaitForTask(ctx, statusTask.ID)
	require.NoError(t, err)
	require.NotContains(t, string(done.Response.Resource), url.QueryEscape(s3.SecretKey))
	taskResource(t, s, statusTask, &st)
	require.Equal(t, "success", st.Status)

	uri := "s3://" + creds + "@" + s3.HostPort + "/backups/" + key
	task, err = s.c.ImportDatabase(ctx, subID, dst.ID, client.Import{SourceType: client.Ptr("aws-s3"), ImportFromURI: []string{uri}})
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	requireSameData(t, rs, redisOf(t, dst))
}
