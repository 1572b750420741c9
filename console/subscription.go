package console

import (
	"net/http"
	"strconv"

	"clouddb/cloudapi/client"
)

// Where the console's create-subscription form places a subscription: the internal cloud
// account, in a single region. clouddb runs every database on this host whatever the
// placement; the API requires one.
const (
	newSubscriptionProvider     = "AWS"
	newSubscriptionCloudAccount = 1
	newSubscriptionRegion       = "us-east-1"
	newSubscriptionCIDR         = "10.0.0.0/24"
)

// subscriptions lists the account's subscriptions, with the create form.
func (c *Console) subscriptions(w http.ResponseWriter, r *http.Request, p *pageContext) {
	c.subscriptionsPage(w, r, p, http.StatusOK, newSubForm{DBMemory: "1"}, nil)
}

// newSubForm is the create-subscription form's values, shown again after an error.
type newSubForm struct {
	Name, DBName, DBMemory string
}

func (c *Console) subscriptionsPage(w http.ResponseWriter, r *http.Request, p *pageContext, status int, form newSubForm, formErr *pageError) {
	list, err := p.api.ListSubscriptions(r.Context())
	if err != nil {
		c.apiError(w, r, p, err)
		return
	}
	data := p.data("Subscriptions")
	data["Subscriptions"] = list.Subscriptions
	data["Form"] = form
	data["Error"] = formErr
	data["Region"] = newSubscriptionProvider + " " + newSubscriptionRegion
	for _, s := range list.Subscriptions {
		if !subscriptionSettled(s.Status) {
			data["Refresh"] = true
		}
	}
	c.render(w, r, status, "subscriptions", data)
}

// createSubscription creates a subscription with the account's first payment method and
// the one database its creation plan must have (the API gives it a password), and goes to
// its task.
func (c *Console) createSubscription(w http.ResponseWriter, r *http.Request, p *pageContext) {
	if pe := parseForm(r); pe != nil {
		c.renderError(w, r, p, pe)
		return
	}
	form := newSubForm{Name: field(r, "name"), DBName: field(r, "dbName"), DBMemory: field(r, "dbMemory")}
	body := map[string]any{
		"name": form.Name,
		"cloudProviders": []client.CreateCloudProvider{{
			Provider:       client.Ptr(newSubscriptionProvider),
			CloudAccountID: client.Ptr(newSubscriptionCloudAccount),
			Regions: []client.CreateRegion{{
				Region:     client.Ptr(newSubscriptionRegion),
				Networking: &client.CreateNetworking{DeploymentCIDR: client.Ptr(newSubscriptionCIDR)},
			}},
		}},
	}
	db := map[string]any{"name": form.DBName}
	if form.DBMemory != "" {
		db["memoryLimitInGb"] = formNumber(form.DBMemory)
	}
	body["databases"] = []any{db}
	pms, err := p.api.ListPaymentMethods(r.Context())
	if err != nil {
		c.apiError(w, r, p, err)
		return
	}
	if len(pms) > 0 {
		body["paymentMethodId"] = pms[0].ID
	}
	var task client.Task
	err = p.api.Do(r.Context(), http.MethodPost, "/subscriptions", body, &task)
	if err == nil {
		err = c.settle(r, p, &task)
	}
	if err != nil {
		c.formError(w, r, p, err, func(fe *pageError) { c.subscriptionsPage(w, r, p, fe.Status, form, fe) })
		return
	}
	redirect(w, r, "/console/tasks/"+task.ID)
}

// subscription is a subscription's databases.
func (c *Console) subscription(w http.ResponseWriter, r *http.Request, p *pageContext) {
	subID, pe := pathID(r, "sub")
	if pe != nil {
		c.renderError(w, r, p, pe)
		return
	}
	sub, err := p.api.GetSubscription(r.Context(), subID)
	if err != nil {
		c.apiError(w, r, p, err)
		return
	}
	dbs, err := p.api.AllDatabases(r.Context(), subID)
	if err != nil {
		c.apiError(w, r, p, err)
		return
	}
	rows := make([]databaseView, 0, len(dbs))
	refresh := !subscriptionSettled(sub.Status)
	for i := range dbs {
		v := newDatabaseView(subID, &dbs[i])
		rows = append(rows, v)
		refresh = refresh || !v.Settled
	}
	data := p.data(sub.Name)
	data["Subscription"] = sub
	data["Databases"] = rows
	data["Refresh"] = refresh
	c.render(w, r, http.StatusOK, "subscription", data)
}

// subscriptionSettled reports whether a subscription's status stays as it is.
func subscriptionSettled(status string) bool {
	return status == client.SubscriptionActive || status == client.SubscriptionError
}

// pathID reads a positive integer path parameter; anything else is a 404 page, since
// no such page exists.
func pathID(r *http.Request, name string) (int, *pageError) {
	v := r.PathValue(name)
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, &pageError{Status: http.StatusNotFound, Code: "NOT_FOUND", Message: "no such page: " + name + " must be a positive integer, got " + strconv.Quote(v)}
	}
	return n, nil
}
