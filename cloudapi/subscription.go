package cloudapi

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"clouddb"
)

func (s *Server) registerSubscriptionRoutes() {
	s.route("GET /subscriptions", s.listSubscriptions)
	s.route("POST /subscriptions", s.createSubscription)
	s.route("GET /subscriptions/redis-versions", s.listRedisVersions)
	s.route("GET /subscriptions/{subscriptionId}", s.getSubscription)
	s.route("PUT /subscriptions/{subscriptionId}", s.updateSubscription)
	s.route("DELETE /subscriptions/{subscriptionId}", s.deleteSubscription)
	s.route("GET /subscriptions/{subscriptionId}/maintenance-windows", s.getMaintenanceWindows)
	s.route("GET /subscriptions/{subscriptionId}/pricing", s.getPricing)
	// Subscription settings (subscription_settings.go); GET …/cidr makes a task each time.
	s.route("PUT /subscriptions/{subscriptionId}/maintenance-windows", s.updateMaintenanceWindows)
	s.route("PUT /subscriptions/{subscriptionId}/resource-tags", s.updateResourceTags)
	s.routeUncached("GET /subscriptions/{subscriptionId}/cidr", s.getCIDRAllowlist)
	s.route("PUT /subscriptions/{subscriptionId}/cidr", s.updateCIDRAllowlist)
}

type subscriptionView struct {
	ID                              int               `json:"id"`
	Name                            string            `json:"name"`
	Status                          string            `json:"status"`
	DeploymentType                  string            `json:"deploymentType"`
	PaymentMethodID                 int               `json:"paymentMethodId,omitempty"`
	PaymentMethodType               string            `json:"paymentMethodType"`
	MemoryStorage                   string            `json:"memoryStorage"`
	StorageEncryption               bool              `json:"storageEncryption"`
	PersistentStorageEncryptionType string            `json:"persistentStorageEncryptionType"`
	DeletionGracePeriod             string            `json:"deletionGracePeriod,omitempty"`
	PublicEndpointAccess            bool              `json:"publicEndpointAccess"`
	NumberOfDatabases               int               `json:"numberOfDatabases"`
	CloudDetails                    []cloudDetailView `json:"cloudDetails"`
	Links                           []any             `json:"links"`
}

type cloudDetailView struct {
	Provider       string        `json:"provider"`
	CloudAccountID int           `json:"cloudAccountId"`
	TotalSizeInGB  float64       `json:"totalSizeInGb"`
	Regions        []regionPlace `json:"regions"`
	ResourceTags   []clouddb.Tag `json:"resourceTags"`
}

type regionPlace struct {
	Region                     string           `json:"region"`
	Networking                 []networkingView `json:"networking"`
	PreferredAvailabilityZones []string         `json:"preferredAvailabilityZones"`
	MultipleAvailabilityZones  bool             `json:"multipleAvailabilityZones"`
}

type networkingView struct {
	DeploymentCIDR string `json:"deploymentCIDR"`
	VpcID          string `json:"vpcId,omitempty"`
	SubnetID       string `json:"subnetId,omitempty"`
}

// newSubscriptionView renders a subscription; dbs are its live databases.
func newSubscriptionView(sub *clouddb.Subscription, dbs []*clouddb.Database) subscriptionView {
	var total float64
	for _, d := range dbs {
		total += d.Spec.SizeGB()
	}
	v := subscriptionView{
		ID:                              sub.ID,
		Name:                            sub.Name,
		Status:                          string(sub.Status),
		DeploymentType:                  sub.DeploymentType,
		PaymentMethodID:                 sub.PaymentMethodID,
		PaymentMethodType:               sub.PaymentMethod,
		MemoryStorage:                   sub.MemoryStorage,
		PersistentStorageEncryptionType: sub.PersistentStorageEncryptionType,
		DeletionGracePeriod:             sub.DeletionGracePeriod,
		PublicEndpointAccess:            sub.PublicEndpointAccess,
		NumberOfDatabases:               len(dbs),
		CloudDetails:                    []cloudDetailView{},
		Links:                           []any{},
	}
	for _, cp := range sub.CloudProviders {
		cd := cloudDetailView{Provider: cp.Provider, CloudAccountID: cp.CloudAccountID, TotalSizeInGB: total,
			Regions: []regionPlace{}, ResourceTags: cp.ResourceTags}
		if cd.ResourceTags == nil {
			cd.ResourceTags = []clouddb.Tag{}
		}
		for _, rg := range cp.Regions {
			zones := rg.PreferredAvailabilityZones
			if zones == nil {
				zones = []string{}
			}
			cd.Regions = append(cd.Regions, regionPlace{
				Region:                     rg.Region,
				Networking:                 []networkingView{{DeploymentCIDR: rg.Networking.DeploymentCIDR, VpcID: rg.Networking.VpcID}},
				PreferredAvailabilityZones: zones,
				MultipleAvailabilityZones:  rg.MultipleAvailabilityZones,
			})
		}
		v.CloudDetails = append(v.CloudDetails, cd)
	}
	return v
}

// findSubscription is a subscription of the caller; one whose deletion has been fully
// provisioned is gone (404), one being deleted still reads as deleting.
func findSubscription(ctx context.Context, tx clouddb.Tx, c *caller, id int) (*clouddb.Subscription, error) {
	sub, err := tx.Subscription(ctx, c.account.ID, id)
	if errors.Is(err, clouddb.ErrNotFound) {
		return nil, clouddb.NotFound(clouddb.ErrTypeSubscriptionNotFound, "subscription %d not found", id)
	}
	return sub, err
}

func liveDatabases(ctx context.Context, tx clouddb.Tx, accountID, subID int) ([]*clouddb.Database, error) {
	dbs, _, err := tx.Databases(ctx, clouddb.DatabaseFilter{AccountID: accountID, SubscriptionID: subID, ExcludeDeleting: true})
	return dbs, err
}

func (s *Server) listSubscriptions(r *http.Request, c *caller) (int, any, error) {
	var (
		subs []*clouddb.Subscription
		dbs  []*clouddb.Database
	)
	err := s.Store.View(r.Context(), func(tx clouddb.Tx) error {
		var err error
		if subs, err = tx.Subscriptions(r.Context(), clouddb.SubscriptionFilter{AccountID: c.account.ID}); err != nil {
			return err
		}
		dbs, err = liveDatabases(r.Context(), tx, c.account.ID, 0)
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	bySub := map[int][]*clouddb.Database{}
	for _, d := range dbs {
		bySub[d.SubscriptionID] = append(bySub[d.SubscriptionID], d)
	}
	views := make([]subscriptionView, 0, len(subs))
	for _, sub := range subs {
		views = append(views, newSubscriptionView(sub, bySub[sub.ID]))
	}
	return http.StatusOK, map[string]any{"accountId": c.account.ID, "subscriptions": views, "links": []any{}}, nil
}

// withSubscription loads the caller's subscription named by the path and its live
// databases.
func (s *Server) withSubscription(r *http.Request, c *caller) (*clouddb.Subscription, []*clouddb.Database, error) {
	id, err := pathID(r, "subscriptionId")
	if err != nil {
		return nil, nil, err
	}
	var (
		sub *clouddb.Subscription
		dbs []*clouddb.Database
	)
	err = s.Store.View(r.Context(), func(tx clouddb.Tx) error {
		var txErr error
		if sub, txErr = findSubscription(r.Context(), tx, c, id); txErr != nil {
			return txErr
		}
		dbs, txErr = liveDatabases(r.Context(), tx, c.account.ID, id)
		return txErr
	})
	return sub, dbs, err
}

func (s *Server) getSubscription(r *http.Request, c *caller) (int, any, error) {
	sub, dbs, err := s.withSubscription(r, c)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, newSubscriptionView(sub, dbs), nil
}

func (s *Server) createSubscription(r *http.Request, c *caller) (int, any, error) {
	var body clouddb.SubscriptionSpec
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	return s.enqueue(r, c, http.StatusAccepted, &clouddb.Task{CommandType: clouddb.CommandSubscriptionCreate}, body)
}

func (s *Server) updateSubscription(r *http.Request, c *caller) (int, any, error) {
	sub, _, err := s.withSubscription(r, c)
	if err != nil {
		return 0, nil, err
	}
	var body clouddb.SubscriptionUpdate
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	// The tags are no field of this body on Redis Cloud: they change through
	// PUT …/resource-tags only, which shares this command.
	body.ResourceTags = nil
	return s.enqueue(r, c, http.StatusOK, &clouddb.Task{CommandType: clouddb.CommandSubscriptionUpdate, SubscriptionID: sub.ID}, body)
}

func (s *Server) deleteSubscription(r *http.Request, c *caller) (int, any, error) {
	sub, _, err := s.withSubscription(r, c)
	if err != nil {
		return 0, nil, err
	}
	return s.enqueue(r, c, http.StatusOK, &clouddb.Task{CommandType: clouddb.CommandSubscriptionDelete, SubscriptionID: sub.ID}, nil)
}

type pricingView struct {
	DatabaseName        string  `json:"databaseName"`
	Type                string  `json:"type"`
	TypeDetails         string  `json:"typeDetails,omitempty"`
	Quantity            int     `json:"quantity"`
	QuantityMeasurement string  `json:"quantityMeasurement"`
	PricePerUnit        float64 `json:"pricePerUnit"`
	PriceCurrency       string  `json:"priceCurrency"`
	PricePeriod         string  `json:"pricePeriod"`
	Region              string  `json:"region"`
}

// getPricing lists one shard per database at no charge: clouddb is self-hosted.
func (s *Server) getPricing(r *http.Request, c *caller) (int, any, error) {
	sub, dbs, err := s.withSubscription(r, c)
	if err != nil {
		return 0, nil, err
	}
	region := ""
	if len(sub.CloudProviders) > 0 && len(sub.CloudProviders[0].Regions) > 0 {
		region = sub.CloudProviders[0].Regions[0].Region
	}
	out := make([]pricingView, 0, len(dbs))
	for _, d := range dbs {
		out = append(out, pricingView{DatabaseName: d.Spec.Name, Type: "Shards", TypeDetails: "standard", Quantity: 1,
			QuantityMeasurement: "shards", PricePerUnit: 0, PriceCurrency: "USD", PricePeriod: "hour", Region: region})
	}
	return http.StatusOK, map[string]any{"pricing": out}, nil
}

// redisVersionView is an entry of GET /subscriptions/redis-versions. eolDate is left out:
// clouddb runs what the operator installed and knows no end-of-life date for it.
type redisVersionView struct {
	Version   string `json:"version"`
	IsPreview bool   `json:"isPreview"`
	IsDefault bool   `json:"isDefault"`
}

// listRedisVersions answers the versions clouddb offers, one per redis-server binary it
// was given (--redis-server), oldest first. It takes subscriptionId as a query parameter
// or, as the Go client sends it, percent-encoded in the path (the router turns that into
// a query); every subscription may run every offered version.
func (s *Server) listRedisVersions(r *http.Request, c *caller) (int, any, error) {
	if r.URL.Query().Has("subscriptionId") {
		id, err := queryInt(r, "subscriptionId", 0, 1, 1<<31-1)
		if err != nil {
			return 0, nil, err
		}
		if err := s.Store.View(r.Context(), func(tx clouddb.Tx) error {
			_, err := findSubscription(r.Context(), tx, c, id)
			return err
		}); err != nil {
			return 0, nil, err
		}
	}
	versions := s.versions()
	out := make([]redisVersionView, 0, len(versions.Offered))
	for _, v := range slices.SortedFunc(slices.Values(versions.Offered), clouddb.CompareRedisVersions) {
		out = append(out, redisVersionView{Version: v, IsDefault: v == versions.Default})
	}
	return http.StatusOK, map[string]any{"redisVersions": out}, nil
}
