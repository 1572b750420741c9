package cloudapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi"
	"clouddb/cloudapi/client"
	"clouddb/internal/apitest"
	"clouddb/sqlite"
	"clouddb/task"
)

// testTimeout bounds every wait of a test: the engine processes a task in milliseconds.
const testTimeout = 15 * time.Second

// Credentials of the bootstrapped keys.
const (
	mainKey, mainSecret     = "main-key", "main-secret-0123456789"
	viewerKey, viewerSecret = "viewer-key", "viewer-secret-0123456789"
	otherKey, otherSecret   = "other-key", "other-secret-0123456789"
	fixedKey, fixedSecret   = "fixed-key", "fixed-secret-0123456789"
	freeKey, freeSecret     = "free-key", "free-secret-0123456789"
)

// env is one clouddb API with real components but no reconciler: a SQLite store in a
// temporary directory, a running task engine and the HTTP server. Resources therefore
// stay pending or draft unless a test moves them through the store.
type env struct {
	t     *testing.T
	store *sqlite.DB
	srv   *httptest.Server
	// http checks every request and answer against the OpenAPI document (apitest).
	http *http.Client
	// base is the /v1 root, e.g. http://127.0.0.1:1234/v1.
	base string

	main   *client.Client // owner key of the flexible account
	viewer *client.Client // viewer key of the flexible account
	other  *client.Client // owner key of a second (annual) account
	fixed  *client.Client // owner key of a fixed-plan account
	free   *client.Client // owner key of a free-plan account

	mainAccount, otherAccount int
	// mainPM and otherPM are the payment methods of the two accounts.
	mainPM, otherPM int
}

// portBase spreads the database port ranges of parallel environments apart, so that the
// real port probing of one does not depend on another.
var portBase atomic.Int32

// newEnv starts the API; opts adjust the server before it starts.
func newEnv(t *testing.T, opts ...func(*cloudapi.Server)) *env {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)

	e := &env{t: t, store: store}
	e.bootstrap()

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	low := 21000 + int(portBase.Add(1)%40)*200
	engine := &task.Engine{
		Store:        store,
		Ports:        &task.Ports{Low: low, High: low + 199, Host: "127.0.0.1"},
		Logger:       quiet,
		PollInterval: 20 * time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := engine.Run(ctx); err != nil {
			t.Errorf("task engine: %v", err)
		}
	}()

	api := &cloudapi.Server{Store: store, Tasks: engine, AdvertiseHost: "127.0.0.1", Logger: quiet}
	for _, o := range opts {
		o(api)
	}
	e.srv = httptest.NewServer(api.Handler())
	e.http = apitest.NewTransport(t, cloudapi.OpenAPI(), apitest.Options{MapURL: apitest.CloudPath,
		Skip: func(r *http.Request) bool { return !apitest.CloudAPI(r) }}).Client()
	e.base = e.srv.URL + "/v1"
	t.Cleanup(func() {
		e.srv.Close()
		cancel()
		<-done
		require.NoError(t, store.Close())
	})

	e.main = e.client(mainKey, mainSecret)
	e.viewer = e.client(viewerKey, viewerSecret)
	e.other = e.client(otherKey, otherSecret)
	e.fixed = e.client(fixedKey, fixedSecret)
	e.free = e.client(freeKey, freeSecret)
	return e
}

// httpClient is the validating client, or a plain one for the fuzz targets' env, whose
// inputs are checked by the fuzz targets themselves.
func (e *env) httpClient() *http.Client {
	if e.http == nil {
		return http.DefaultClient
	}
	return e.http
}

// client returns a client of the env's /v1 API with a short poll interval.
func (e *env) client(key, secret string) *client.Client {
	return client.New(e.base, key, secret, client.WithPollInterval(10*time.Millisecond), client.WithHTTPClient(e.httpClient()))
}

// bootstrap writes what `clouddb serve` creates on first start, for several accounts: the
// internal cloud account, accounts on each plan, payment methods and API keys.
func (e *env) bootstrap() {
	ctx := context.Background()
	next := time.Now().Year() + 2
	err := e.store.Update(ctx, func(tx clouddb.Tx) error {
		if err := tx.CreateCloudAccount(ctx, &clouddb.CloudAccount{ID: clouddb.InternalCloudAccountID, AccountID: 0,
			Name: "Redis Internal Resources", Provider: "AWS", Status: clouddb.CloudAccountActive}); err != nil {
			return err
		}
		accounts := []struct {
			name  string
			plan  clouddb.Plan
			keys  [][2]string
			roles []clouddb.APIKeyRole
			pm    *int
			id    *int
		}{
			{"main", clouddb.PlanFlexible, [][2]string{{mainKey, mainSecret}, {viewerKey, viewerSecret}}, []clouddb.APIKeyRole{clouddb.RoleOwner, clouddb.RoleViewer}, &e.mainPM, &e.mainAccount},
			{"other", clouddb.PlanAnnual, [][2]string{{otherKey, otherSecret}}, []clouddb.APIKeyRole{clouddb.RoleOwner}, &e.otherPM, &e.otherAccount},
			{"fixed", clouddb.PlanFixed, [][2]string{{fixedKey, fixedSecret}}, []clouddb.APIKeyRole{clouddb.RoleOwner}, nil, nil},
			{"free", clouddb.PlanFree, [][2]string{{freeKey, freeSecret}}, []clouddb.APIKeyRole{clouddb.RoleOwner}, nil, nil},
		}
		for _, a := range accounts {
			acc := &clouddb.Account{Name: a.name, Plan: a.plan}
			if err := tx.CreateAccount(ctx, acc); err != nil {
				return err
			}
			if a.id != nil {
				*a.id = acc.ID
			}
			pm := &clouddb.PaymentMethod{AccountID: acc.ID, Type: "Visa", CreditCardEndsWith: 4242,
				NameOnCard: a.name + " owner", ExpirationMonth: 12, ExpirationYear: next}
			if err := tx.CreatePaymentMethod(ctx, pm); err != nil {
				return err
			}
			if a.pm != nil {
				*a.pm = pm.ID
			}
			for i, k := range a.keys {
				if err := tx.CreateAPIKey(ctx, &clouddb.APIKey{AccountID: acc.ID, Name: k[0] + "-name", Key: k[0],
					SecretDigest: clouddb.DigestSecret(k[1]), Role: a.roles[i]}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	require.NoError(e.t, err)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// subscriptionBody is a valid create body on the internal cloud account whose creation
// plan makes `quantity` databases of sizeGB each, named name, name-2, ...
func (e *env) subscriptionBody(name string, pm int, quantity int, sizeGB float64) client.CreateSubscription {
	return client.CreateSubscription{
		Name:            client.Ptr(name),
		PaymentMethodID: client.Ptr(pm),
		CloudProviders: []client.CreateCloudProvider{{
			Provider:       client.Ptr("AWS"),
			CloudAccountID: client.Ptr(clouddb.InternalCloudAccountID),
			Regions: []client.CreateRegion{{
				Region:     client.Ptr("us-east-1"),
				Networking: &client.CreateNetworking{DeploymentCIDR: client.Ptr("10.0.0.0/24")},
			}},
		}},
		Databases: []client.CreateSubscriptionDatabase{{
			Name:            client.Ptr("db"),
			DatasetSizeInGB: client.Ptr(sizeGB),
			Quantity:        client.Ptr(quantity),
		}},
	}
}

// createSubscription creates a subscription with one 1.5 GB database named "db"
// (quantity databases when given) and returns its id. The subscription's capacity is
// rounded up to whole GBs, so it has room for another 0.5 GB without a resize (which
// would make it pending again).
func (e *env) createSubscription(c *client.Client, pm int, name string, quantity ...int) int {
	e.t.Helper()
	q := 1
	if len(quantity) > 0 {
		q = quantity[0]
	}
	ctx := testCtx(e.t)
	tk, err := c.Wait(ctx)(c.CreateSubscription(ctx, e.subscriptionBody(name, pm, q, 1.5)))
	require.NoError(e.t, err)
	require.NotZero(e.t, tk.ResourceID())
	return tk.ResourceID()
}

// activate marks a subscription active through the store: there is no reconciler in
// these tests to provision it.
func (e *env) activate(subID int) {
	e.t.Helper()
	ctx := context.Background()
	var ok bool
	require.NoError(e.t, e.store.Update(ctx, func(tx clouddb.Tx) error {
		s, err := tx.Subscription(ctx, 0, subID)
		if err != nil {
			return err
		}
		ok, err = tx.SetSubscriptionStatus(ctx, subID, s.Generation, clouddb.SubscriptionActive)
		return err
	}))
	require.True(e.t, ok)
}

// activeSubscription creates a subscription of the main account and marks it active
// (see activate); it returns the subscription id and the id of its first database.
func (e *env) activeSubscription(name string, quantity ...int) (int, int) {
	e.t.Helper()
	subID := e.createSubscription(e.main, e.mainPM, name, quantity...)
	e.activate(subID)
	page, err := e.main.ListDatabases(testCtx(e.t), subID, 100, 0)
	require.NoError(e.t, err)
	require.NotEmpty(e.t, page.Subscription[0].Databases)
	return subID, page.Subscription[0].Databases[0].ID
}

// createCloudAccount creates a cloud account with c and returns its id.
func (e *env) createCloudAccount(c *client.Client, name string) int {
	e.t.Helper()
	ctx := testCtx(e.t)
	tk, err := c.Wait(ctx)(c.CreateCloudAccount(ctx, cloudAccountBody(name)))
	require.NoError(e.t, err)
	return tk.ResourceID()
}

func cloudAccountBody(name string) client.CreateCloudAccount {
	return client.CreateCloudAccount{
		Name:            client.Ptr(name),
		Provider:        client.Ptr("AWS"),
		AccessKeyID:     client.Ptr("AKIAEXAMPLE"),
		AccessSecretKey: client.Ptr("secret"),
		ConsoleUsername: client.Ptr("user"),
		ConsolePassword: client.Ptr("pass"),
		SignInLoginURL:  client.Ptr("https://example.signin.aws.amazon.com/console"),
	}
}

// tasks returns every task of an account straight from the store.
func (e *env) tasks(accountID int) []*clouddb.Task {
	e.t.Helper()
	var out []*clouddb.Task
	ctx := context.Background()
	require.NoError(e.t, e.store.View(ctx, func(tx clouddb.Tx) error {
		var err error
		out, err = tx.Tasks(ctx, clouddb.TaskFilter{AccountID: accountID})
		return err
	}))
	return out
}

// counts is what a failed request must leave unchanged.
type counts struct{ tasks, subscriptions, databases, cloudAccounts, logs int }

func (e *env) counts(accountID int) counts {
	e.t.Helper()
	var c counts
	ctx := context.Background()
	require.NoError(e.t, e.store.View(ctx, func(tx clouddb.Tx) error {
		ts, err := tx.Tasks(ctx, clouddb.TaskFilter{AccountID: accountID})
		if err != nil {
			return err
		}
		subs, err := tx.Subscriptions(ctx, clouddb.SubscriptionFilter{AccountID: accountID})
		if err != nil {
			return err
		}
		_, ndb, err := tx.Databases(ctx, clouddb.DatabaseFilter{AccountID: accountID})
		if err != nil {
			return err
		}
		cas, err := tx.CloudAccounts(ctx, clouddb.CloudAccountFilter{AccountID: accountID})
		if err != nil {
			return err
		}
		logs, err := tx.LogEntries(ctx, clouddb.LogFilter{AccountID: accountID, Limit: 100000})
		if err != nil {
			return err
		}
		c = counts{len(ts), len(subs), ndb, len(cas), len(logs)}
		return nil
	}))
	return c
}

// subscription reads a subscription straight from the store.
func (e *env) subscription(id int) *clouddb.Subscription {
	e.t.Helper()
	var s *clouddb.Subscription
	ctx := context.Background()
	require.NoError(e.t, e.store.View(ctx, func(tx clouddb.Tx) error {
		var err error
		s, err = tx.Subscription(ctx, 0, id)
		return err
	}))
	return s
}

// response is a raw HTTP answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a raw request (the body as is, no body when nil) with the given key pair; an
// empty key or secret leaves its header out.
func (e *env) do(method, path, key, secret string, body []byte) response {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(testCtx(e.t), method, e.srv.URL+path, rd)
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	if secret != "" {
		req.Header.Set("x-api-secret-key", secret)
	}
	resp, err := e.httpClient().Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return response{resp.StatusCode, resp.Header, b}
}

// apiError is the server's synchronous error body.
type apiError struct {
	Error struct {
		Type        string `json:"type"`
		Status      int    `json:"status"`
		Description string `json:"description"`
	} `json:"error"`
}

// requireError checks a raw answer is a JSON error with the status (also in the body)
// and the type, and returns it.
func requireError(t *testing.T, r response, status int, typ string) apiError {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	var e apiError
	require.NoError(t, json.Unmarshal(r.body, &e), "body: %s", r.body)
	require.Equal(t, status, e.Error.Status, "body: %s", r.body)
	if typ != "" {
		require.Equal(t, typ, e.Error.Type, "body: %s", r.body)
	}
	require.NotEmpty(t, e.Error.Description)
	return e
}

// requireClientError checks err is a *client.Error with the status and type.
func requireClientError(t *testing.T, err error, status int, typ string) {
	t.Helper()
	var ce *client.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, status, ce.StatusCode, "error: %v", err)
	if typ != "" {
		require.Equal(t, typ, ce.Type, "error: %v", err)
	}
}

// requireTaskFails waits for a task and checks it ended in processing-error with exactly
// this response.error; it returns the failed task.
func requireTaskFails(t *testing.T, c *client.Client, tk *client.Task, submitErr error, want client.TaskError) *client.Task {
	t.Helper()
	require.NoError(t, submitErr)
	got, err := c.WaitForTask(testCtx(t), tk.ID)
	require.Error(t, err)
	require.NotNil(t, got)
	require.Equal(t, client.TaskFailed, got.Status)
	require.NotNil(t, got.Response)
	require.NotNil(t, got.Response.Error)
	require.Equal(t, want, *got.Response.Error)
	require.Nil(t, got.Response.ResourceID)
	return got
}
