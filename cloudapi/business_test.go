package cloudapi_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi/client"
)

// Subscription creates that break a business rule are accepted (the shape is fine), then
// fail in processing with the exact response.error, and write nothing.
func TestSubscriptionCreateRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	foreignCA := e.createCloudAccount(e.other, "theirs")
	before := e.counts(e.mainAccount)

	body := func(edit func(*client.CreateSubscription)) client.CreateSubscription {
		b := e.subscriptionBody("rules", e.mainPM, 1, 1)
		edit(&b)
		return b
	}
	cases := []struct {
		name string
		body client.CreateSubscription
		want client.TaskError
	}{
		{"unknown payment method", body(func(b *client.CreateSubscription) { b.PaymentMethodID = client.Ptr(999999) }),
			client.TaskError{Type: "SUBSCRIPTION_PI_NOT_FOUND", Status: "400 BAD_REQUEST",
				Description: "subscription: payment method 999999 was not found for this account (see GET /payment-methods)"}},
		{"foreign payment method", body(func(b *client.CreateSubscription) { b.PaymentMethodID = client.Ptr(e.otherPM) }),
			client.TaskError{Type: "SUBSCRIPTION_PI_NOT_FOUND", Status: "400 BAD_REQUEST",
				Description: fmt.Sprintf("subscription: payment method %d was not found for this account (see GET /payment-methods)", e.otherPM)}},
		{"no payment method", body(func(b *client.CreateSubscription) { b.PaymentMethodID = nil }),
			client.TaskError{Type: "SUBSCRIPTION_PI_NOT_FOUND", Status: "400 BAD_REQUEST",
				Description: "subscription: paymentMethodId is required (see GET /payment-methods)"}},
		{"foreign cloud account", body(func(b *client.CreateSubscription) { b.CloudProviders[0].CloudAccountID = client.Ptr(foreignCA) }),
			client.TaskError{Type: "CLOUD_ACCOUNT_NOT_FOUND", Status: "404 NOT_FOUND",
				Description: fmt.Sprintf("subscription: cloudProviders[0].cloudAccountId %d was not found for this account (see GET /cloud-accounts)", foreignCA)}},
		{"unknown cloud account", body(func(b *client.CreateSubscription) { b.CloudProviders[0].CloudAccountID = client.Ptr(424242) }),
			client.TaskError{Type: "CLOUD_ACCOUNT_NOT_FOUND", Status: "404 NOT_FOUND",
				Description: "subscription: cloudProviders[0].cloudAccountId 424242 was not found for this account (see GET /cloud-accounts)"}},
		{"no databases", body(func(b *client.CreateSubscription) { b.Databases = nil }),
			client.TaskError{Type: "SUBSCRIPTION_DATABASES_REQUIRED", Status: "400 BAD_REQUEST",
				Description: "subscription: databases needs at least one element"}},
		{"deploymentCIDR with host bits", body(func(b *client.CreateSubscription) {
			b.CloudProviders[0].Regions[0].Networking.DeploymentCIDR = client.Ptr("10.0.0.1/24")
		}), client.TaskError{Type: "INVALID_DEPLOYMENT_CIDR", Status: "400 BAD_REQUEST",
			Description: `subscription: cloudProviders[0].regions[0].networking.deploymentCIDR "10.0.0.1/24" is not a CIDR block`}},
		{"deploymentCIDR not a CIDR", body(func(b *client.CreateSubscription) {
			b.CloudProviders[0].Regions[0].Networking.DeploymentCIDR = client.Ptr("banana")
		}), client.TaskError{Type: "INVALID_DEPLOYMENT_CIDR", Status: "400 BAD_REQUEST",
			Description: `subscription: cloudProviders[0].regions[0].networking.deploymentCIDR "banana" is not a CIDR block`}},
		{"plan database name", body(func(b *client.CreateSubscription) { b.Databases[0].Name = client.Ptr("bad_name!") }),
			client.TaskError{Type: "DATABASE_INVALID_NAME", Status: "400 BAD_REQUEST",
				Description: `subscription: databases[0]: database: name "bad_name!" may only contain letters, digits and hyphens`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk, err := e.main.CreateSubscription(ctx, c.body)
			requireTaskFails(t, e.main, tk, err, c.want)
		})
	}
	after := e.counts(e.mainAccount)
	require.Equal(t, before.tasks+len(cases), after.tasks)
	after.tasks = before.tasks
	require.Equal(t, before, after, "a failed task wrote something")
}

// At most three subscriptions may be non-active at once: with three pending, a fourth
// create fails and nothing is written; once one is active again a create succeeds.
func TestNonActiveSubscriptionLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	var subs []int
	for i := range 3 {
		subs = append(subs, e.createSubscription(e.main, e.mainPM, fmt.Sprintf("pending-%d", i)))
	}
	before := e.counts(e.mainAccount)
	tk, err := e.main.CreateSubscription(ctx, e.subscriptionBody("fourth", e.mainPM, 1, 1))
	requireTaskFails(t, e.main, tk, err, client.TaskError{Type: "SUBSCRIPTION_MAX_PENDING_REACHED", Status: "429 TOO_MANY_REQUESTS",
		Description: "3 subscriptions are already not active; at most 3 may be at once: wait for them to become active"})
	after := e.counts(e.mainAccount)
	require.Equal(t, before.tasks+1, after.tasks)
	after.tasks = before.tasks
	require.Equal(t, before, after)

	// Another account is not held back by this one's pending subscriptions.
	e.createSubscription(e.other, e.otherPM, "elsewhere")

	e.activate(subs[0])
	e.createSubscription(e.main, e.mainPM, "fourth")
}

// Database creates that break a rule fail in processing with the exact response.error
// and leave the subscription and its databases as they were.
func TestDatabaseCreateRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, _ := e.activeSubscription("rules")
	pendingSub := e.createSubscription(e.main, e.mainPM, "pending")
	subBefore := e.subscription(subID)
	before := e.counts(e.mainAccount)

	ok := func(edit func(*client.CreateDatabase)) client.CreateDatabase {
		b := client.CreateDatabase{Name: client.Ptr("new-db"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("s3cret-pass")}
		edit(&b)
		return b
	}
	cases := []struct {
		name string
		sub  int
		body client.CreateDatabase
		want client.TaskError
	}{
		{"invalid name", subID, ok(func(b *client.CreateDatabase) { b.Name = client.Ptr("my_db!") }),
			client.TaskError{Type: "DATABASE_INVALID_NAME", Status: "400 BAD_REQUEST",
				Description: `database: name "my_db!" may only contain letters, digits and hyphens`}},
		{"duplicate name", subID, ok(func(b *client.CreateDatabase) { b.Name = client.Ptr("db") }),
			client.TaskError{Type: "DATABASE_NAME_ALREADY_EXISTS", Status: "409 CONFLICT",
				Description: fmt.Sprintf(`database: name "db" is already used in subscription %d`, subID)}},
		{"no password", subID, ok(func(b *client.CreateDatabase) { b.Password = nil }),
			client.TaskError{Type: "DATABASE_PASSWORD_REQUIRED", Status: "400 BAD_REQUEST",
				Description: "database: password is required"}},
		{"no size", subID, ok(func(b *client.CreateDatabase) { b.MemoryLimitInGB = nil }),
			client.TaskError{Type: "DATABASE_INVALID_SIZE", Status: "400 BAD_REQUEST",
				Description: "database: memoryLimitInGb or datasetSizeInGb is required"}},
		{"negative size", subID, ok(func(b *client.CreateDatabase) { b.MemoryLimitInGB = client.Ptr(-1.0) }),
			client.TaskError{Type: "DATABASE_INVALID_SIZE", Status: "400 BAD_REQUEST",
				Description: "database: memoryLimitInGb must be at least 0.1 and at most 1024 (GB)"}},
		{"negative dataset size", subID, ok(func(b *client.CreateDatabase) {
			b.MemoryLimitInGB = nil
			b.DatasetSizeInGB = client.Ptr(-2.0)
		}), client.TaskError{Type: "DATABASE_INVALID_SIZE", Status: "400 BAD_REQUEST",
			Description: "database: datasetSizeInGb must be at least 0.1 and at most 1024 (GB)"}},
		{"unsupported backup path", subID, ok(func(b *client.CreateDatabase) { b.PeriodicBackupPath = client.Ptr("gs://bucket/x") }),
			client.TaskError{Type: "INVALID_FIELD", Status: "400 BAD_REQUEST",
				Description: "database: periodicBackupPath: unsupported: a gs URI cannot be a backup destination (want an absolute path or a file, ftp, s3, abs URI)"}},
		{"relative backup path", subID, ok(func(b *client.CreateDatabase) { b.PeriodicBackupPath = client.Ptr("backups/x") }),
			client.TaskError{Type: "INVALID_FIELD", Status: "400 BAD_REQUEST",
				Description: `database: periodicBackupPath: invalid location: "backups/x" is neither an absolute path nor a URI (relative paths are refused)`}},
		{"storage path of another type", subID, ok(func(b *client.CreateDatabase) {
			b.RemoteBackup = &client.RemoteBackup{Active: client.Ptr(true), StorageType: client.Ptr("aws-s3"), StoragePath: client.Ptr("ftp://user:hidden-pw@127.0.0.1/x")}
		}), client.TaskError{Type: "INVALID_FIELD", Status: "400 BAD_REQUEST",
			Description: `database: remoteBackup.storagePath: unsupported: a ftp URI cannot be used with type "aws-s3" (want s3)`}},
		{"google storage", subID, ok(func(b *client.CreateDatabase) {
			b.RemoteBackup = &client.RemoteBackup{Active: client.Ptr(true), StorageType: client.Ptr("google-blob-storage"), StoragePath: client.Ptr("gs://bucket/x")}
		}), client.TaskError{Type: "INVALID_FIELD", Status: "400 BAD_REQUEST",
			Description: "database: remoteBackup.storagePath: unsupported: storage type google-blob-storage is not supported by this server"}},
		{"replica of a metadata address", subID, ok(func(b *client.CreateDatabase) {
			b.ReplicaOf = []string{"redis://user:hidden-pw@169.254.169.254:6379"}
		}), client.TaskError{Type: "INVALID_FIELD", Status: "400 BAD_REQUEST",
			Description: "database: replicaOf[0] (host 169.254.169.254): forbidden address: 169.254.169.254 (cloud metadata address)"}},
		{"replica of a metadata host", subID, ok(func(b *client.CreateDatabase) {
			b.ReplicaOf = []string{"redis://metadata.google.internal:6379"}
		}), client.TaskError{Type: "INVALID_FIELD", Status: "400 BAD_REQUEST",
			Description: "database: replicaOf[0] (host metadata.google.internal): forbidden address: metadata.google.internal (cloud metadata host)"}},
		{"pending subscription", pendingSub, ok(func(*client.CreateDatabase) {}),
			client.TaskError{Type: "SUBSCRIPTION_NOT_ACTIVE", Status: "403 FORBIDDEN",
				Description: fmt.Sprintf("subscription %d is pending; wait until it is active", pendingSub)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk, err := e.main.CreateDatabase(ctx, c.sub, c.body)
			requireTaskFails(t, e.main, tk, err, c.want)
		})
	}
	after := e.counts(e.mainAccount)
	require.Equal(t, before.tasks+len(cases), after.tasks)
	after.tasks = before.tasks
	require.Equal(t, before, after, "a failed task wrote something")
	require.Equal(t, subBefore, e.subscription(subID))
}

// An update that sets a backup destination no backup could be written to fails its task
// and leaves the database as it was.
func TestDatabaseUpdateBackupPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, dbID := e.activeSubscription("backup-path")
	before, err := e.main.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	tk, err := e.main.UpdateDatabase(ctx, subID, dbID, client.UpdateDatabase{PeriodicBackupPath: client.Ptr("gs://bucket/x")})
	requireTaskFails(t, e.main, tk, err, client.TaskError{Type: "INVALID_FIELD", Status: "400 BAD_REQUEST",
		Description: "database: periodicBackupPath: unsupported: a gs URI cannot be a backup destination (want an absolute path or a file, ftp, s3, abs URI)"})
	after, err := e.main.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	require.Equal(t, before, after)

	tk, err = e.main.UpdateDatabase(ctx, subID, dbID, client.UpdateDatabase{PeriodicBackupPath: client.Ptr("/var/backups/clouddb")})
	require.NoError(t, err)
	_, err = e.main.WaitForTask(ctx, tk.ID)
	require.NoError(t, err, "an absolute path is a destination")
}

// A subscription with databases left cannot be deleted; it stays as it was. Once its
// databases are deleted, the delete goes through and the subscription reads deleting.
func TestSubscriptionDeleteWithDatabases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, dbID := e.activeSubscription("full")
	subBefore := e.subscription(subID)
	before := e.counts(e.mainAccount)

	tk, err := e.main.DeleteSubscription(ctx, subID)
	requireTaskFails(t, e.main, tk, err, client.TaskError{Type: "SUBSCRIPTION_HAS_DATABASES", Status: "409 CONFLICT",
		Description: fmt.Sprintf("subscription %d still has 1 database(s); delete them first", subID)})
	require.Equal(t, subBefore, e.subscription(subID))
	after := e.counts(e.mainAccount)
	after.tasks--
	require.Equal(t, before, after)

	_, err = e.main.Wait(ctx)(e.main.DeleteDatabase(ctx, subID, dbID))
	require.NoError(t, err)
	_, err = e.main.GetDatabase(ctx, subID, dbID)
	require.True(t, client.IsNotFound(err), "a deleted database must answer 404 at once: %v", err)
	done, err := e.main.Wait(ctx)(e.main.DeleteSubscription(ctx, subID))
	require.NoError(t, err)
	require.Equal(t, subID, done.ResourceID())
	s, err := e.main.GetSubscription(ctx, subID)
	require.NoError(t, err)
	require.Equal(t, client.SubscriptionDeleting, s.Status)
	require.Equal(t, clouddb.SubscriptionDeleting, e.subscription(subID).Status)
}

// Database updates and deletes in a subscription that is not active fail with
// SUBSCRIPTION_NOT_ACTIVE, like creates, and change nothing.
func TestDatabaseChangesNeedActiveSubscription(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID := e.createSubscription(e.main, e.mainPM, "still-pending")
	page, err := e.main.ListDatabases(ctx, subID, 100, 0)
	require.NoError(t, err)
	dbID := page.Subscription[0].Databases[0].ID
	before := e.counts(e.mainAccount)
	want := client.TaskError{Type: "SUBSCRIPTION_NOT_ACTIVE", Status: "403 FORBIDDEN",
		Description: fmt.Sprintf("subscription %d is pending; wait until it is active", subID)}

	tk, err := e.main.UpdateDatabase(ctx, subID, dbID, client.UpdateDatabase{Name: client.Ptr("renamed")})
	requireTaskFails(t, e.main, tk, err, want)
	tk, err = e.main.DeleteDatabase(ctx, subID, dbID)
	requireTaskFails(t, e.main, tk, err, want)

	after := e.counts(e.mainAccount)
	require.Equal(t, before.tasks+2, after.tasks)
	after.tasks = before.tasks
	require.Equal(t, before, after, "a failed task wrote something")
}

// memoryLimitInGb and datasetSizeInGb may come together: both are kept and read back as
// sent. A size of zero is refused like a negative one (as a size not given: the body's
// zero and an absent field are one to the spec).
func TestDatabaseSizes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, _ := e.activeSubscription("sizes")
	tk, err := e.main.Wait(ctx)(e.main.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("both"),
		MemoryLimitInGB: client.Ptr(0.5), DatasetSizeInGB: client.Ptr(0.25), Password: client.Ptr("pw")}))
	require.NoError(t, err)
	got, err := e.main.GetDatabase(ctx, subID, tk.ResourceID())
	require.NoError(t, err)
	require.Equal(t, 0.5, got.MemoryLimitInGB)
	require.Equal(t, 0.25, got.DatasetSizeInGB)

	for _, body := range []client.CreateDatabase{
		{Name: client.Ptr("zero"), MemoryLimitInGB: client.Ptr(0.0), Password: client.Ptr("pw")},
		{Name: client.Ptr("zero-dataset"), DatasetSizeInGB: client.Ptr(0.0), Password: client.Ptr("pw")},
	} {
		tk, err := e.main.CreateDatabase(ctx, subID, body)
		require.NoError(t, err)
		got, err := e.main.WaitForTask(ctx, tk.ID)
		require.Error(t, err, *body.Name)
		require.Equal(t, "DATABASE_INVALID_SIZE", got.Response.Error.Type, *body.Name)
		require.Equal(t, "database: memoryLimitInGb or datasetSizeInGb is required", got.Response.Error.Description, *body.Name)
	}
}

// A size below the floor (0.1 GB) is refused on every path that takes one, with the field
// and the minimum named: a size that rounds towards 0 bytes would become maxmemory 0,
// which redis reads as "no limit". The floor itself is accepted.
func TestDatabaseSizeFloor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, dbID := e.activeSubscription("floor")
	before := e.counts(e.mainAccount)
	want := func(field string) client.TaskError {
		return client.TaskError{Type: "DATABASE_INVALID_SIZE", Status: "400 BAD_REQUEST",
			Description: "database: " + field + " must be at least 0.1 and at most 1024 (GB)"}
	}
	tk, err := e.main.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("tiny"), MemoryLimitInGB: client.Ptr(1e-10), Password: client.Ptr("pw")})
	requireTaskFails(t, e.main, tk, err, want("memoryLimitInGb"))
	tk, err = e.main.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("tiny"), DatasetSizeInGB: client.Ptr(0.099), Password: client.Ptr("pw")})
	requireTaskFails(t, e.main, tk, err, want("datasetSizeInGb"))
	tk, err = e.main.UpdateDatabase(ctx, subID, dbID, client.UpdateDatabase{MemoryLimitInGB: client.Ptr(1e-10)})
	requireTaskFails(t, e.main, tk, err, want("memoryLimitInGb"))
	tk, err = e.main.UpdateDatabase(ctx, subID, dbID, client.UpdateDatabase{DatasetSizeInGB: client.Ptr(0.05)})
	requireTaskFails(t, e.main, tk, err, want("datasetSizeInGb"))
	plan := e.subscriptionBody("tiny-plan", e.mainPM, 200, 1e-10)
	tk, err = e.main.CreateSubscription(ctx, plan)
	w := want("datasetSizeInGb")
	w.Description = "subscription: databases[0]: " + w.Description
	requireTaskFails(t, e.main, tk, err, w)
	after := e.counts(e.mainAccount)
	require.Equal(t, before.tasks+5, after.tasks)
	after.tasks = before.tasks
	require.Equal(t, before, after, "a refused size wrote something")

	_, err = e.main.Wait(ctx)(e.main.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("smallest"), DatasetSizeInGB: client.Ptr(0.1), Password: client.Ptr("pw")}))
	require.NoError(t, err, "the floor itself is a valid size")
}
