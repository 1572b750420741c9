package cloudapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi/client"
)

// sendTask sends a raw request with the main key, checks the HTTP status and the task's
// commandType, and returns the task once it has ended (nil error: completed).
func (e *env) sendTask(method, path string, body []byte, status int, command string) (*client.Task, error) {
	e.t.Helper()
	res := e.do(method, path, mainKey, mainSecret, body)
	require.Equal(e.t, status, res.status, "%s %s: %s", method, path, res.body)
	m := rawTask(e.t, res.body)
	require.Equal(e.t, command, m["commandType"], "%s %s", method, path)
	require.Equal(e.t, "received", m["status"])
	return e.main.WaitForTask(testCtx(e.t), m["taskId"].(string))
}

// requireSettingFails checks a task ended in processing-error with a 400 of the type;
// when description is not empty, the description is exactly it.
func requireSettingFails(t *testing.T, tk *client.Task, err error, typ, description string) {
	t.Helper()
	var ce *client.Error
	require.ErrorAs(t, err, &ce, "the task should fail with %s", typ)
	require.NotNil(t, tk)
	require.Equal(t, client.TaskFailed, tk.Status)
	require.Equal(t, typ, tk.Response.Error.Type, "%+v", tk.Response.Error)
	require.Equal(t, "400 BAD_REQUEST", tk.Response.Error.Status)
	if description != "" {
		require.Equal(t, description, tk.Response.Error.Description)
	} else {
		require.NotEmpty(t, tk.Response.Error.Description)
	}
}

func intp(v int) *int { return &v }

// Maintenance windows: a new subscription reads {"mode":"automatic"}; what PUT sets reads
// back exactly, windows and days in the order sent, on every read; back to automatic
// reads {"mode":"automatic"} again. The change is a task that leaves the subscription
// active.
func TestMaintenanceWindows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, _ := e.activeSubscription("mw")
	path := fmt.Sprintf("/v1/subscriptions/%d/maintenance-windows", subID)
	res := e.do(http.MethodGet, path, mainKey, mainSecret, nil)
	require.Equal(t, http.StatusOK, res.status)
	require.JSONEq(t, `{"mode":"automatic"}`, string(res.body))
	before := e.subscription(subID)

	// The body Terraform sends, days and windows out of calendar order.
	manual := `{"mode":"manual","windows":[{"startHour":22,"durationInHours":8,"days":["Thursday","Monday"]},` +
		`{"startHour":0,"durationInHours":24,"days":["Sunday"]},{"startHour":5,"durationInHours":4,"days":["Wednesday","Tuesday","Saturday"]}]}`
	tk, err := e.sendTask(http.MethodPut, path, []byte(manual), http.StatusOK, clouddb.CommandMaintenanceWindowsUpdate)
	require.NoError(t, err)
	require.Equal(t, subID, tk.ResourceID())
	want := &client.MaintenanceWindows{Mode: "manual", Windows: []client.MaintenanceWindow{
		{StartHour: 22, DurationInHours: 8, Days: []string{"Thursday", "Monday"}},
		{StartHour: 0, DurationInHours: 24, Days: []string{"Sunday"}},
		{StartHour: 5, DurationInHours: 4, Days: []string{"Wednesday", "Tuesday", "Saturday"}},
	}}
	for range 2 {
		got, gerr := e.main.GetMaintenanceWindows(ctx, subID)
		require.NoError(t, gerr)
		require.Equal(t, want, got)
	}
	res = e.do(http.MethodGet, path, mainKey, mainSecret, nil)
	require.JSONEq(t, manual, string(res.body))
	after := e.subscription(subID)
	require.Equal(t, clouddb.SubscriptionActive, after.Status, "nothing to provision")
	require.Equal(t, before.Generation, after.Generation)

	// Through the client: the automatic body leaves windows out.
	_, err = e.main.Wait(ctx)(e.main.UpdateMaintenanceWindows(ctx, subID, client.UpdateMaintenanceWindows{Mode: client.Ptr("automatic")}))
	require.NoError(t, err)
	res = e.do(http.MethodGet, path, mainKey, mainSecret, nil)
	require.JSONEq(t, `{"mode":"automatic"}`, string(res.body))
	_, err = e.main.Wait(ctx)(e.main.UpdateMaintenanceWindows(ctx, subID, client.UpdateMaintenanceWindows{Mode: client.Ptr("manual"),
		Windows: []client.UpdateMaintenanceWindow{{StartHour: intp(0), DurationInHours: intp(4), Days: []string{"Friday"}}}}))
	require.NoError(t, err)
	got, err := e.main.GetMaintenanceWindows(ctx, subID)
	require.NoError(t, err)
	require.Equal(t, &client.MaintenanceWindows{Mode: "manual", Windows: []client.MaintenanceWindow{{StartHour: 0, DurationInHours: 4, Days: []string{"Friday"}}}}, got)

	// Every change is in the system log.
	logs, err := e.main.Logs(ctx, client.LogQuery{})
	require.NoError(t, err)
	require.Contains(t, logs[0].Description, "Maintenance windows of subscription")
}

// Each rule of a maintenance windows body fails its task with the catalogued code, and
// leaves what was set.
func TestMaintenanceWindowsValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, _ := e.activeSubscription("mw")
	path := fmt.Sprintf("/v1/subscriptions/%d/maintenance-windows", subID)
	set := `{"mode":"manual","windows":[{"startHour":3,"durationInHours":6,"days":["Monday"]}]}`
	_, err := e.sendTask(http.MethodPut, path, []byte(set), http.StatusOK, clouddb.CommandMaintenanceWindowsUpdate)
	require.NoError(t, err)
	window := func(start, duration string, days string) string {
		var parts []string
		if start != "" {
			parts = append(parts, `"startHour":`+start)
		}
		if duration != "" {
			parts = append(parts, `"durationInHours":`+duration)
		}
		if days != "" {
			parts = append(parts, `"days":`+days)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	ok := window("1", "4", `["Monday"]`)
	cases := []struct {
		name, body, typ, description string
	}{
		{"manual without windows", `{"mode":"manual"}`, clouddb.ErrTypeMaintenanceManualWithoutWindows,
			"Must provide at least one maintenance window with manual maintenance mode"},
		{"manual with empty windows", `{"mode":"manual","windows":[]}`, clouddb.ErrTypeMaintenanceManualWithoutWindows,
			"Must provide at least one maintenance window with manual maintenance mode"},
		{"automatic with windows", `{"mode":"automatic","windows":[` + ok + `]}`, clouddb.ErrTypeMaintenanceAutomaticWithWindows,
			"Automatic mode cannot be set with a manual maintenance window"},
		{"no mode", `{"windows":[` + ok + `]}`, clouddb.ErrTypeInvalidField, "maintenance windows: mode is required: automatic or manual"},
		{"unknown mode", `{"mode":"sometimes","windows":[` + ok + `]}`, clouddb.ErrTypeInvalidField,
			`maintenance windows: mode must be automatic or manual, got "sometimes"`},
		{"eight windows", `{"mode":"manual","windows":[` + strings.Repeat(ok+",", 7) + ok + `]}`, clouddb.ErrTypeMaintenanceTooManyWindows,
			"maintenance windows: at most 7 windows may be set, got 8"},
		{"start hour 24", `{"mode":"manual","windows":[` + ok + "," + window("24", "4", `["Monday"]`) + `]}`, clouddb.ErrTypeMaintenanceStartHour,
			"maintenance windows: windows[1].startHour must be an hour from 0 to 23, got 24"},
		{"negative start hour", `{"mode":"manual","windows":[` + window("-1", "4", `["Monday"]`) + `]}`, clouddb.ErrTypeMaintenanceStartHour, ""},
		{"no start hour", `{"mode":"manual","windows":[` + window("", "4", `["Monday"]`) + `]}`, clouddb.ErrTypeMaintenanceStartHour,
			"maintenance windows: windows[0].startHour is required (0 to 23)"},
		{"duration 3", `{"mode":"manual","windows":[` + window("1", "3", `["Monday"]`) + `]}`, clouddb.ErrTypeMaintenanceDuration,
			"maintenance windows: windows[0].durationInHours must be from 4 to 24 hours, got 3"},
		{"duration 25", `{"mode":"manual","windows":[` + window("1", "25", `["Monday"]`) + `]}`, clouddb.ErrTypeMaintenanceDuration, ""},
		{"no duration", `{"mode":"manual","windows":[` + window("1", "", `["Monday"]`) + `]}`, clouddb.ErrTypeMaintenanceDuration, ""},
		{"no days", `{"mode":"manual","windows":[` + window("1", "4", "") + `]}`, clouddb.ErrTypeMaintenanceDays, ""},
		{"empty days", `{"mode":"manual","windows":[` + window("1", "4", `[]`) + `]}`, clouddb.ErrTypeMaintenanceDays, ""},
		{"lower-case day", `{"mode":"manual","windows":[` + window("1", "4", `["Monday","friday"]`) + `]}`, clouddb.ErrTypeMaintenanceDays,
			`maintenance windows: windows[0].days[1] "friday" is not one of [Monday Tuesday Wednesday Thursday Friday Saturday Sunday]`},
		{"null day", `{"mode":"manual","windows":[` + window("1", "4", `[null]`) + `]}`, clouddb.ErrTypeMaintenanceDays, ""},
		{"duplicate day", `{"mode":"manual","windows":[` + window("1", "4", `["Monday","Tuesday","Monday"]`) + `]}`, clouddb.ErrTypeMaintenanceDuplicateDays,
			"maintenance windows: windows[0].days has Monday twice"},
	}
	for _, c := range cases {
		tk, terr := e.sendTask(http.MethodPut, path, []byte(c.body), http.StatusOK, clouddb.CommandMaintenanceWindowsUpdate)
		t.Run(c.name, func(t *testing.T) { requireSettingFails(t, tk, terr, c.typ, c.description) })
	}
	got, err := e.main.GetMaintenanceWindows(ctx, subID)
	require.NoError(t, err)
	require.Equal(t, &client.MaintenanceWindows{Mode: "manual", Windows: []client.MaintenanceWindow{{StartHour: 3, DurationInHours: 6, Days: []string{"Monday"}}}}, got,
		"a failed update changes nothing")

	// A body of the wrong shape is refused at once, with no task.
	before := e.counts(e.mainAccount)
	for _, body := range []string{`[]`, `{"mode":1}`, `{"mode":"manual","windows":{}}`, `{"mode":"manual","windows":[{"startHour":"1"}]}`, `{`} {
		res := e.do(http.MethodPut, path, mainKey, mainSecret, []byte(body))
		require.Equal(t, http.StatusBadRequest, res.status, "%s: %s", body, res.body)
	}
	res := e.do(http.MethodPut, path, mainKey, mainSecret, []byte(`{"mode":"manual","windows":[{"startHour":"1"}]}`))
	requireError(t, res, http.StatusBadRequest, clouddb.ErrTypeInvalidField)
	require.Equal(t, before, e.counts(e.mainAccount))

	// On ram-and-flash a window lasts at least 8 hours.
	body := e.subscriptionBody("rof", e.mainPM, 1, 1)
	body.MemoryStorage = client.Ptr("ram-and-flash")
	created, err := e.main.Wait(ctx)(e.main.CreateSubscription(ctx, body))
	require.NoError(t, err)
	rof := created.ResourceID()
	rofPath := fmt.Sprintf("/v1/subscriptions/%d/maintenance-windows", rof)
	tk, err := e.sendTask(http.MethodPut, rofPath, []byte(`{"mode":"manual","windows":[`+window("1", "7", `["Monday"]`)+`]}`), http.StatusOK,
		clouddb.CommandMaintenanceWindowsUpdate)
	requireSettingFails(t, tk, err, clouddb.ErrTypeMaintenanceRoFDuration,
		"maintenance windows: windows[0].durationInHours must be from 8 to 24 hours on a ram-and-flash subscription, got 7")
	tk, err = e.sendTask(http.MethodPut, rofPath, []byte(`{"mode":"manual","windows":[`+window("1", "3", `["Monday"]`)+`]}`), http.StatusOK,
		clouddb.CommandMaintenanceWindowsUpdate)
	requireSettingFails(t, tk, err, clouddb.ErrTypeMaintenanceDuration, "")
	_, err = e.sendTask(http.MethodPut, rofPath, []byte(`{"mode":"manual","windows":[`+window("1", "8", `["Monday"]`)+`]}`), http.StatusOK,
		clouddb.CommandMaintenanceWindowsUpdate)
	require.NoError(t, err)
}

// Resource tags: PUT …/resource-tags is a subscription update whose tags read back in
// cloudDetails[].resourceTags in the order sent; [] and null both clear them.
func TestSubscriptionResourceTags(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	// Tags given at create (here on the internal cloud account) read back as well.
	body := e.subscriptionBody("tags", e.mainPM, 1, 1)
	body.CloudProviders[0].ResourceTags = []client.Tag{{Key: "team", Value: "db"}, {Key: "env", Value: "dev"}}
	created, err := e.main.Wait(ctx)(e.main.CreateSubscription(ctx, body))
	require.NoError(t, err)
	subID := created.ResourceID()
	sub, err := e.main.GetSubscription(ctx, subID)
	require.NoError(t, err)
	require.Equal(t, []client.Tag{{Key: "team", Value: "db"}, {Key: "env", Value: "dev"}}, sub.CloudDetails[0].ResourceTags)
	e.activate(subID)

	path := fmt.Sprintf("/v1/subscriptions/%d/resource-tags", subID)
	tk, err := e.sendTask(http.MethodPut, path, []byte(`{"resourceTags":[{"key":"z","value":"1"},{"key":"a","value":"two words"},{"key":"m","value":"3"}]}`),
		http.StatusOK, clouddb.CommandSubscriptionUpdate)
	require.NoError(t, err)
	require.Equal(t, subID, tk.ResourceID())
	want := []client.Tag{{Key: "z", Value: "1"}, {Key: "a", Value: "two words"}, {Key: "m", Value: "3"}}
	for range 2 {
		sub, err = e.main.GetSubscription(ctx, subID)
		require.NoError(t, err)
		require.Equal(t, want, sub.CloudDetails[0].ResourceTags)
	}
	require.Equal(t, client.SubscriptionPending, sub.Status, "a subscription update is provisioned")
	e.activate(subID)

	clear := func(body []byte) {
		t.Helper()
		_, serr := e.sendTask(http.MethodPut, path, body, http.StatusOK, clouddb.CommandSubscriptionUpdate)
		require.NoError(t, serr)
		e.activate(subID)
		res := e.do(http.MethodGet, fmt.Sprintf("/v1/subscriptions/%d", subID), mainKey, mainSecret, nil)
		var raw struct {
			CloudDetails []struct {
				ResourceTags json.RawMessage `json:"resourceTags"`
			} `json:"cloudDetails"`
		}
		require.NoError(t, json.Unmarshal(res.body, &raw))
		require.JSONEq(t, `[]`, string(raw.CloudDetails[0].ResourceTags), "%s cleared the tags", body)
	}
	clear([]byte(`{"resourceTags":[]}`))
	_, err = e.main.Wait(ctx)(e.main.UpdateResourceTags(ctx, subID, []client.Tag{{Key: "k", Value: "v"}}))
	require.NoError(t, err)
	sub, err = e.main.GetSubscription(ctx, subID)
	require.NoError(t, err)
	require.Equal(t, []client.Tag{{Key: "k", Value: "v"}}, sub.CloudDetails[0].ResourceTags)
	e.activate(subID)
	clear([]byte(`{"resourceTags":null}`))

	// The client sends a nil list as null, which clears too.
	_, err = e.main.Wait(ctx)(e.main.UpdateResourceTags(ctx, subID, []client.Tag{{Key: "k", Value: "v"}}))
	require.NoError(t, err)
	e.activate(subID)
	_, err = e.main.Wait(ctx)(e.main.UpdateResourceTags(ctx, subID, nil))
	require.NoError(t, err)
	sub, err = e.main.GetSubscription(ctx, subID)
	require.NoError(t, err)
	require.Empty(t, sub.CloudDetails[0].ResourceTags)
	e.activate(subID)

	// A plain subscription update carries no tags: one sent there is not applied.
	_, err = e.main.Wait(ctx)(e.main.UpdateResourceTags(ctx, subID, []client.Tag{{Key: "kept", Value: "1"}}))
	require.NoError(t, err)
	e.activate(subID)
	_, err = e.sendTask(http.MethodPut, fmt.Sprintf("/v1/subscriptions/%d", subID), []byte(`{"name":"tags-2","resourceTags":[{"key":"x","value":"y"}]}`),
		http.StatusOK, clouddb.CommandSubscriptionUpdate)
	require.NoError(t, err)
	sub, err = e.main.GetSubscription(ctx, subID)
	require.NoError(t, err)
	require.Equal(t, "tags-2", sub.Name)
	require.Equal(t, []client.Tag{{Key: "kept", Value: "1"}}, sub.CloudDetails[0].ResourceTags)
	e.activate(subID)

	// A body without the key is refused at once.
	before := e.counts(e.mainAccount)
	requireError(t, e.do(http.MethodPut, path, mainKey, mainSecret, []byte(`{}`)), http.StatusBadRequest, clouddb.ErrTypeInvalidField)
	requireError(t, e.do(http.MethodPut, path, mainKey, mainSecret, []byte(`{"resourceTags":{}}`)), http.StatusBadRequest, clouddb.ErrTypeInvalidField)
	requireError(t, e.do(http.MethodPut, path, mainKey, mainSecret, []byte(`{"resourceTags":[{"key":1}]}`)), http.StatusBadRequest, clouddb.ErrTypeInvalidField)
	require.Equal(t, before, e.counts(e.mainAccount))
}

// Each rule of resource tags fails its task with the catalogued code (the lengths with
// INVALID_FIELD, as for every tag), at create as on PUT …/resource-tags.
func TestSubscriptionResourceTagsValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, _ := e.activeSubscription("tags")
	path := fmt.Sprintf("/v1/subscriptions/%d/resource-tags", subID)
	many := make([]string, clouddb.MaxTags+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{"key":"k%d","value":"v"}`, i)
	}
	cases := []struct {
		name, tags, typ, description string
	}{
		{"duplicate key", `[{"key":"a","value":"1"},{"key":"b","value":"2"},{"key":"a","value":"3"}]`, clouddb.ErrTypeResourceTagsDuplicateKey,
			`subscription: resourceTags[2].key "a" is given twice`},
		{"empty key", `[{"key":"","value":"1"}]`, clouddb.ErrTypeResourceTagsEmptyKey, "subscription: resourceTags[0].key is required"},
		{"no key", `[{"value":"1"}]`, clouddb.ErrTypeResourceTagsEmptyKey, ""},
		{"missing value", `[{"key":"a","value":"1"},{"key":"b"}]`, clouddb.ErrTypeResourceTagsMissingValue,
			`subscription: resourceTags[1].value is required (tag "b")`},
		{"empty value", `[{"key":"a","value":""}]`, clouddb.ErrTypeResourceTagsMissingValue, ""},
		{"too many", "[" + strings.Join(many, ",") + "]", clouddb.ErrTypeResourceTagsTooMany,
			"subscription: resourceTags may hold at most 64 elements, got 65"},
		{"key too long", `[{"key":"` + strings.Repeat("k", clouddb.MaxTagKeyLength+1) + `","value":"v"}]`, clouddb.ErrTypeInvalidField,
			"subscription: resourceTags[0].key must be at most 128 characters, got 129"},
		{"value too long", `[{"key":"k","value":"` + strings.Repeat("v", clouddb.MaxTagValueLength+1) + `"}]`, clouddb.ErrTypeInvalidField,
			"subscription: resourceTags[0].value must be at most 256 characters, got 257"},
		{"control character", `[{"key":"k\n","value":"v"}]`, clouddb.ErrTypeInvalidField, ""},
	}
	for _, c := range cases {
		tk, err := e.sendTask(http.MethodPut, path, []byte(`{"resourceTags":`+c.tags+`}`), http.StatusOK, clouddb.CommandSubscriptionUpdate)
		t.Run(c.name, func(t *testing.T) { requireSettingFails(t, tk, err, c.typ, c.description) })
	}
	// At the limits, the tags are taken.
	at := make([]client.Tag, clouddb.MaxTags)
	for i := range at {
		at[i] = client.Tag{Key: fmt.Sprintf("%03d", i) + strings.Repeat("k", clouddb.MaxTagKeyLength-3), Value: strings.Repeat("v", clouddb.MaxTagValueLength)}
	}
	_, err := e.main.Wait(ctx)(e.main.UpdateResourceTags(ctx, subID, at))
	require.NoError(t, err)
	sub, err := e.main.GetSubscription(ctx, subID)
	require.NoError(t, err)
	require.Equal(t, at, sub.CloudDetails[0].ResourceTags)

	// A pending subscription takes no update.
	tk, err := e.main.UpdateResourceTags(ctx, subID, []client.Tag{{Key: "k", Value: "v"}})
	requireTaskFails(t, e.main, tk, err, client.TaskError{Type: clouddb.ErrTypeSubscriptionNotActive, Status: "403 FORBIDDEN",
		Description: fmt.Sprintf("subscription %d is pending; wait until it is active", subID)})

	// The create applies the same rules.
	body := e.subscriptionBody("dup", e.mainPM, 1, 1)
	body.CloudProviders[0].ResourceTags = []client.Tag{{Key: "a", Value: "1"}, {Key: "a", Value: "2"}}
	tk, err = e.main.CreateSubscription(ctx, body)
	requireTaskFails(t, e.main, tk, err, client.TaskError{Type: clouddb.ErrTypeResourceTagsDuplicateKey, Status: "400 BAD_REQUEST",
		Description: `subscription: cloudProviders[0].resourceTags[1].key "a" is given twice`})
	body.CloudProviders[0].ResourceTags = []client.Tag{{Key: "a"}}
	tk, err = e.main.CreateSubscription(ctx, body)
	requireTaskFails(t, e.main, tk, err, client.TaskError{Type: clouddb.ErrTypeResourceTagsMissingValue, Status: "400 BAD_REQUEST",
		Description: `subscription: cloudProviders[0].resourceTags[0].value is required (tag "a")`})
}

// customerSubscription makes an active subscription of the main account on a cloud
// account of its own, as the CIDR allow list needs.
func (e *env) customerSubscription(name string) int {
	e.t.Helper()
	ctx := testCtx(e.t)
	caID := e.createCloudAccount(e.main, name)
	body := e.subscriptionBody(name, e.mainPM, 1, 1)
	body.CloudProviders[0].CloudAccountID = client.Ptr(caID)
	tk, err := e.main.Wait(ctx)(e.main.CreateSubscription(ctx, body))
	require.NoError(e.t, err)
	e.activate(tk.ResourceID())
	return tk.ResourceID()
}

// The CIDR allow list of a subscription on a customer cloud account reads back exactly
// as sent, through a GET that answers a task; PUT replaces the whole list.
func TestCIDRAllowlist(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID := e.customerSubscription("byoc")
	path := fmt.Sprintf("/v1/subscriptions/%d/cidr", subID)
	before := e.subscription(subID)

	read := func() json.RawMessage {
		t.Helper()
		tk, err := e.sendTask(http.MethodGet, path, nil, http.StatusAccepted, clouddb.CommandCIDRGet)
		require.NoError(t, err)
		require.Equal(t, subID, tk.ResourceID())
		return tk.Response.Resource
	}
	require.JSONEq(t, `{"cidr_ips":[],"security_group_ids":[],"errors":null}`, string(read()))

	tk, err := e.sendTask(http.MethodPut, path, []byte(`{"cidrIps":["192.168.0.0/24","10.0.0.0/16","2001:db8::/32","203.0.113.7/32"],`+
		`"securityGroupIds":["sg-0123456789abcdef0","sg-89abcdef"]}`), http.StatusOK, clouddb.CommandCIDRUpdate)
	require.NoError(t, err)
	require.Equal(t, subID, tk.ResourceID())
	want := `{"cidr_ips":["192.168.0.0/24","10.0.0.0/16","2001:db8::/32","203.0.113.7/32"],"security_group_ids":["sg-0123456789abcdef0","sg-89abcdef"],"errors":null}`
	require.JSONEq(t, want, string(read()))
	require.JSONEq(t, want, string(read()))
	got, err := e.main.GetCIDRAllowlist(ctx, subID)
	require.NoError(t, err)
	require.Equal(t, []string{"192.168.0.0/24", "10.0.0.0/16", "2001:db8::/32", "203.0.113.7/32"}, got.CIDRIPs)
	require.Equal(t, []string{"sg-0123456789abcdef0", "sg-89abcdef"}, got.SecurityGroupIDs)
	require.Equal(t, "null", string(got.Errors))
	after := e.subscription(subID)
	require.Equal(t, clouddb.SubscriptionActive, after.Status, "nothing to provision: a subscription update may follow at once")
	require.Equal(t, before.Generation, after.Generation)

	// A full replacement: the security groups left out are removed.
	_, err = e.main.Wait(ctx)(e.main.UpdateCIDRAllowlist(ctx, subID, client.UpdateCIDRAllowlist{CIDRIPs: []string{"10.0.0.0/16"}}))
	require.NoError(t, err)
	require.JSONEq(t, `{"cidr_ips":["10.0.0.0/16"],"security_group_ids":[],"errors":null}`, string(read()))
	_, err = e.main.Wait(ctx)(e.main.UpdateCIDRAllowlist(ctx, subID, client.UpdateCIDRAllowlist{SecurityGroupIDs: []string{"sg-89abcdef"}}))
	require.NoError(t, err)
	require.JSONEq(t, `{"cidr_ips":[],"security_group_ids":["sg-89abcdef"],"errors":null}`, string(read()))
	// Terraform clears the list with {}.
	_, err = e.sendTask(http.MethodPut, path, []byte(`{}`), http.StatusOK, clouddb.CommandCIDRUpdate)
	require.NoError(t, err)
	require.JSONEq(t, `{"cidr_ips":[],"security_group_ids":[],"errors":null}`, string(read()))

	// Every rule fails its task with the catalogued code and changes nothing.
	_, err = e.main.Wait(ctx)(e.main.UpdateCIDRAllowlist(ctx, subID, client.UpdateCIDRAllowlist{CIDRIPs: []string{"10.0.0.0/8"}}))
	require.NoError(t, err)
	many := make([]string, clouddb.MaxCIDRAllowlist)
	for i := range many {
		many[i] = fmt.Sprintf(`"10.%d.0.0/16"`, i)
	}
	cases := []struct {
		name, body, typ, description string
	}{
		{"not a CIDR", `{"cidrIps":["10.0.0.0/8","nope"]}`, clouddb.ErrTypeCIDRInvalid,
			`cidr allow list: cidrIps[1] "nope" is not a CIDR block (e.g. 10.0.0.0/16)`},
		{"an address", `{"cidrIps":["10.0.0.1"]}`, clouddb.ErrTypeCIDRInvalid, ""},
		{"host bits set", `{"cidrIps":["10.0.0.1/24"]}`, clouddb.ErrTypeCIDRInvalid, ""},
		{"empty", `{"cidrIps":[""]}`, clouddb.ErrTypeCIDRInvalid, ""},
		{"duplicate CIDR", `{"cidrIps":["10.1.0.0/16","10.2.0.0/16","10.1.0.0/16"]}`, clouddb.ErrTypeCIDRDuplicate,
			`cidr allow list: cidrIps[2] "10.1.0.0/16" is cidrIps[0] again`},
		{"duplicate IPv6 spelled apart", `{"cidrIps":["2001:db8::/32","2001:0db8:0::/32"]}`, clouddb.ErrTypeCIDRDuplicate, ""},
		{"not a security group", `{"securityGroupIds":["sg-0123456789abcdef0","group-1"]}`, clouddb.ErrTypeCIDRInvalidSG,
			`cidr allow list: securityGroupIds[1] "group-1" is not a security group id (sg- and 8 or 17 hex digits)`},
		{"security group of 9 digits", `{"securityGroupIds":["sg-0123456789"]}`, clouddb.ErrTypeCIDRInvalidSG, ""},
		{"duplicate security group", `{"securityGroupIds":["sg-89abcdef","sg-89abcdef"]}`, clouddb.ErrTypeCIDRDuplicateSG,
			`cidr allow list: securityGroupIds[1] "sg-89abcdef" is securityGroupIds[0] again`},
		{"over the limit", `{"cidrIps":[` + strings.Join(many, ",") + `],"securityGroupIds":["sg-89abcdef"]}`, clouddb.ErrTypeCIDRLimitExceeded,
			"cidr allow list: cidrIps and securityGroupIds may hold at most 32 entries together, got 33"},
	}
	for _, c := range cases {
		tk, terr := e.sendTask(http.MethodPut, path, []byte(c.body), http.StatusOK, clouddb.CommandCIDRUpdate)
		t.Run(c.name, func(t *testing.T) { requireSettingFails(t, tk, terr, c.typ, c.description) })
	}
	require.JSONEq(t, `{"cidr_ips":["10.0.0.0/8"],"security_group_ids":[],"errors":null}`, string(read()))
	// At the limit, the list is taken.
	_, err = e.sendTask(http.MethodPut, path, []byte(`{"cidrIps":[`+strings.Join(many[1:], ",")+`],"securityGroupIds":["sg-89abcdef"]}`),
		http.StatusOK, clouddb.CommandCIDRUpdate)
	require.NoError(t, err)

	// A body of the wrong shape is refused at once.
	before2 := e.counts(e.mainAccount)
	requireError(t, e.do(http.MethodPut, path, mainKey, mainSecret, []byte(`{"cidrIps":"10.0.0.0/8"}`)), http.StatusBadRequest, clouddb.ErrTypeInvalidField)
	requireError(t, e.do(http.MethodPut, path, mainKey, mainSecret, []byte(`null`)), http.StatusBadRequest, clouddb.ErrTypeMalformedBody)
	require.Equal(t, before2, e.counts(e.mainAccount))
}

// A subscription on the internal cloud account has no CIDR allow list: both calls fail
// their task with CIDR_WHITELIST_NOT_ALLOWED (Terraform makes neither there).
func TestCIDRAllowlistInternalCloudAccount(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, _ := e.activeSubscription("internal")
	want := fmt.Sprintf("cidr allow list: subscription %d runs in the internal cloud account (id 1); the CIDR allow list is for subscriptions of your own cloud account", subID)
	path := fmt.Sprintf("/v1/subscriptions/%d/cidr", subID)
	tk, err := e.sendTask(http.MethodGet, path, nil, http.StatusAccepted, clouddb.CommandCIDRGet)
	requireSettingFails(t, tk, err, clouddb.ErrTypeCIDRNotAllowed, want)
	tk, err = e.sendTask(http.MethodPut, path, []byte(`{"cidrIps":["10.0.0.0/8"]}`), http.StatusOK, clouddb.CommandCIDRUpdate)
	requireSettingFails(t, tk, err, clouddb.ErrTypeCIDRNotAllowed, want)
	_, err = e.main.GetCIDRAllowlist(ctx, subID)
	requireClientError(t, err, http.StatusBadRequest, clouddb.ErrTypeCIDRNotAllowed)
	require.Equal(t, clouddb.CIDRAllowlist{}, e.subscription(subID).CIDRAllowlist)
}

// Security groups are AWS's: a GCP subscription's allow list takes CIDRs only.
func TestCIDRAllowlistGCP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	ca := cloudAccountBody("gcp")
	ca.Provider = client.Ptr("GCP")
	created, err := e.main.Wait(ctx)(e.main.CreateCloudAccount(ctx, ca))
	require.NoError(t, err)
	body := e.subscriptionBody("gcp", e.mainPM, 1, 1)
	body.CloudProviders[0].Provider = client.Ptr("GCP")
	body.CloudProviders[0].CloudAccountID = client.Ptr(created.ResourceID())
	sub, err := e.main.Wait(ctx)(e.main.CreateSubscription(ctx, body))
	require.NoError(t, err)
	subID := sub.ResourceID()
	tk, err := e.main.UpdateCIDRAllowlist(ctx, subID, client.UpdateCIDRAllowlist{SecurityGroupIDs: []string{"sg-89abcdef"}})
	requireTaskFails(t, e.main, tk, err, client.TaskError{Type: clouddb.ErrTypeCIDRInvalidSG, Status: "400 BAD_REQUEST",
		Description: fmt.Sprintf("cidr allow list: security groups exist on AWS only; subscription %d runs on GCP", subID)})
	_, err = e.main.Wait(ctx)(e.main.UpdateCIDRAllowlist(ctx, subID, client.UpdateCIDRAllowlist{CIDRIPs: []string{"10.0.0.0/8"}}))
	require.NoError(t, err)
	got, err := e.main.GetCIDRAllowlist(ctx, subID)
	require.NoError(t, err)
	require.Equal(t, []string{"10.0.0.0/8"}, got.CIDRIPs)
}

// Another account's subscription is 404 on every settings endpoint, with no task; a
// viewer key may read the settings but not change them.
func TestSubscriptionSettingsScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	subID := e.customerSubscription("mine")
	sub := fmt.Sprintf("/v1/subscriptions/%d", subID)
	writes := []route{
		{http.MethodPut, sub + "/maintenance-windows", []byte(`{"mode":"automatic"}`)},
		{http.MethodPut, sub + "/resource-tags", []byte(`{"resourceTags":[]}`)},
		{http.MethodPut, sub + "/cidr", []byte(`{}`)},
	}
	reads := []route{{http.MethodGet, sub + "/maintenance-windows", nil}, {http.MethodGet, sub + "/cidr", nil}}
	mainBefore, otherBefore := e.counts(e.mainAccount), e.counts(e.otherAccount)
	for _, r := range append(append([]route{}, writes...), reads...) {
		requireError(t, e.do(r.method, r.path, otherKey, otherSecret, r.body), http.StatusNotFound, clouddb.ErrTypeSubscriptionNotFound)
		missing := strings.Replace(r.path, sub, fmt.Sprintf("/v1/subscriptions/%d", subID+1000), 1)
		requireError(t, e.do(r.method, missing, mainKey, mainSecret, r.body), http.StatusNotFound, clouddb.ErrTypeSubscriptionNotFound)
	}
	for _, r := range writes {
		requireError(t, e.do(r.method, r.path, viewerKey, viewerSecret, r.body), http.StatusForbidden, "")
	}
	require.Equal(t, mainBefore, e.counts(e.mainAccount))
	require.Equal(t, otherBefore, e.counts(e.otherAccount))
	res := e.do(http.MethodGet, sub+"/maintenance-windows", viewerKey, viewerSecret, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)
	res = e.do(http.MethodGet, sub+"/cidr", viewerKey, viewerSecret, nil)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
}
