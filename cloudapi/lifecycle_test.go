package cloudapi_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi/client"
)

// A cloud account goes draft on create, change-draft on update (never pending, which
// fails Terraform), and is gone (404) once its delete is processed. Its secrets are never
// read back; its key id reads back as sent.
func TestCloudAccountLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	id := e.createCloudAccount(e.main, "life")
	ca, err := e.main.GetCloudAccount(ctx, id)
	require.NoError(t, err)
	require.Equal(t, client.CloudAccount{ID: id, Name: "life", Provider: "AWS", Status: client.CloudAccountDraft,
		AccessKeyID: "AKIAEXAMPLE", SignInLoginURL: "https://example.signin.aws.amazon.com/console"}, *ca)
	res := e.do(http.MethodGet, fmt.Sprintf("/v1/cloud-accounts/%d", id), mainKey, mainSecret, nil)
	for _, secret := range []string{`"secret"`, "accessSecretKey", "consolePassword", "consoleUsername"} {
		require.NotContains(t, string(res.body), secret)
	}

	_, err = e.main.Wait(ctx)(e.main.UpdateCloudAccount(ctx, id, client.UpdateCloudAccount{Name: client.Ptr("renamed")}))
	require.NoError(t, err)
	ca, err = e.main.GetCloudAccount(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "renamed", ca.Name)
	require.Equal(t, client.CloudAccountChangeDraft, ca.Status)

	// The internal account is read-only.
	tk, err := e.main.UpdateCloudAccount(ctx, client.InternalCloudAccountID, client.UpdateCloudAccount{Name: client.Ptr("mine")})
	requireTaskFails(t, e.main, tk, err, client.TaskError{Type: "CLOUD_ACCOUNT_READ_ONLY", Status: "403 FORBIDDEN",
		Description: "cloud account 1 is the service's internal account and cannot be changed"})

	_, err = e.main.Wait(ctx)(e.main.DeleteCloudAccount(ctx, id))
	require.NoError(t, err)
	_, err = e.main.GetCloudAccount(ctx, id)
	require.True(t, client.IsNotFound(err), "%v", err)
	list, err := e.main.ListCloudAccounts(ctx)
	require.NoError(t, err)
	require.Len(t, list.CloudAccounts, 1)
}

// The calls Terraform makes around a subscription and its databases work end to end
// through the client.
func TestSubscriptionAndDatabaseLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID := e.createSubscription(e.main, e.mainPM, "life")
	sub, err := e.main.GetSubscription(ctx, subID)
	require.NoError(t, err)
	require.Equal(t, client.SubscriptionPending, sub.Status)
	// No reconciler runs here: the test provisions the subscription through the store.
	e.activate(subID)
	sub, err = e.main.WaitForSubscriptionStatus(ctx, subID, client.SubscriptionActive)
	require.NoError(t, err)
	require.Equal(t, "life", sub.Name)

	mw, err := e.main.GetMaintenanceWindows(ctx, subID)
	require.NoError(t, err)
	require.Equal(t, "automatic", mw.Mode)
	pricing, err := e.main.GetPricing(ctx, subID)
	require.NoError(t, err)
	require.Len(t, pricing, 1)
	require.Equal(t, "db", pricing[0].DatabaseName)

	created, err := e.main.Wait(ctx)(e.main.CreateDatabase(ctx, subID, client.CreateDatabase{
		Name: client.Ptr("cache"), Protocol: client.Ptr("redis"), DatasetSizeInGB: client.Ptr(0.25),
		DataPersistence: client.Ptr("aof-every-1-second"), DataEvictionPolicy: client.Ptr("allkeys-lru"),
		ThroughputMeasurement: &client.Throughput{By: "operations-per-second", Value: 1000},
		Password:              client.Ptr("cache-pass"), SourceIP: []string{"10.0.0.0/8"},
		Alerts: []client.Alert{{Name: "dataset-size", Value: 80}},
	}))
	require.NoError(t, err)
	dbID := created.ResourceID()
	db, err := e.main.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	require.Equal(t, "cache", db.Name)
	require.Equal(t, 0.25, db.DatasetSizeInGB)
	require.Equal(t, "aof-every-1-second", db.DataPersistence)
	require.Equal(t, "allkeys-lru", db.DataEvictionPolicy)
	require.Equal(t, &client.Throughput{By: "operations-per-second", Value: 1000}, db.ThroughputMeasurement)
	require.Equal(t, "cache-pass", db.Security.Password)
	require.Equal(t, []string{"10.0.0.0/8"}, db.Security.SourceIPs)
	require.Equal(t, []client.Alert{{Name: "dataset-size", Value: 80}}, db.Alerts)
	require.Equal(t, client.DatabasePending, db.Status)

	tags, err := e.main.PutDatabaseTags(ctx, subID, dbID, []client.Tag{{Key: "env", Value: "test"}})
	require.NoError(t, err)
	require.Equal(t, []client.Tag{{Key: "env", Value: "test"}}, tags)
	tags, err = e.main.GetDatabaseTags(ctx, subID, dbID)
	require.NoError(t, err)
	require.Equal(t, []client.Tag{{Key: "env", Value: "test"}}, tags)
	tags, err = e.main.PutDatabaseTags(ctx, subID, dbID, nil)
	require.NoError(t, err)
	require.Empty(t, tags)

	_, err = e.main.Wait(ctx)(e.main.UpdateSubscription(ctx, subID, client.UpdateSubscription{Name: client.Ptr("renamed"), PublicEndpointAccess: client.Ptr(false)}))
	require.NoError(t, err)
	sub, err = e.main.GetSubscription(ctx, subID)
	require.NoError(t, err)
	require.Equal(t, "renamed", sub.Name)
	require.Equal(t, client.SubscriptionPending, sub.Status, "an update is provisioned")
	require.NotNil(t, sub.PublicEndpointAccess)
	require.False(t, *sub.PublicEndpointAccess)
	e.activate(subID)

	all, err := e.main.AllDatabases(ctx, subID)
	require.NoError(t, err)
	for _, d := range all {
		_, err = e.main.Wait(ctx)(e.main.DeleteDatabase(ctx, subID, d.ID))
		require.NoError(t, err)
	}
	_, err = e.main.Wait(ctx)(e.main.DeleteSubscription(ctx, subID))
	require.NoError(t, err)
	// The subscription reads deleting until the reconciler removes its rows; with no
	// reconciler here, the test removes them through the store.
	_, err = e.main.WaitForSubscriptionStatus(ctx, subID, client.SubscriptionDeleting)
	require.NoError(t, err)
	require.NoError(t, e.store.Update(ctx, func(tx clouddb.Tx) error {
		dbs, _, err := tx.Databases(ctx, clouddb.DatabaseFilter{SubscriptionID: subID})
		if err != nil {
			return err
		}
		for _, d := range dbs {
			if d.Status != clouddb.DatabaseDeleting {
				return fmt.Errorf("database %d is %s, not deleting", d.ID, d.Status)
			}
			if err := tx.DeleteDatabase(ctx, d.ID); err != nil {
				return err
			}
		}
		return tx.DeleteSubscription(ctx, subID)
	}))
	require.NoError(t, e.main.WaitForSubscriptionGone(ctx, subID))
}

// Request bodies are capped: an oversized one gets a JSON 413 and no task.
func TestOversizedBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	before := e.counts(e.mainAccount)
	big := []byte(`{"name":"` + strings.Repeat("x", 2<<20) + `"}`)
	res := e.do(http.MethodPost, "/v1/cloud-accounts", mainKey, mainSecret, big)
	requireError(t, res, http.StatusRequestEntityTooLarge, "REQUEST_TOO_LARGE")
	require.Equal(t, before, e.counts(e.mainAccount))
	require.False(t, bytes.Contains(res.body, []byte("xxxx")))
}
