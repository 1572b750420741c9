package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Subscription statuses.
const (
	SubscriptionPending  = "pending"
	SubscriptionActive   = "active"
	SubscriptionDeleting = "deleting"
	SubscriptionError    = "error"
)

// Subscription is GET /subscriptions/{id} (and each element of the list).
type Subscription struct {
	ID             int    `json:"id"`
	Name           string `json:"name"`
	Status         string `json:"status"`
	DeploymentType string `json:"deploymentType,omitempty"`
	// PaymentMethodType is what the create body calls paymentMethod.
	PaymentMethodType               string         `json:"paymentMethodType,omitempty"`
	PaymentMethodID                 int            `json:"paymentMethodId,omitempty"`
	MemoryStorage                   string         `json:"memoryStorage,omitempty"`
	StorageEncryption               bool           `json:"storageEncryption"`
	NumberOfDatabases               int            `json:"numberOfDatabases"`
	CloudDetails                    []CloudDetail  `json:"cloudDetails"`
	PersistentStorageEncryptionType string         `json:"persistentStorageEncryptionType,omitempty"`
	DeletionGracePeriod             string         `json:"deletionGracePeriod,omitempty"`
	CustomerManagedKeyAccessDetails *CMKAccessInfo `json:"customerManagedKeyAccessDetails,omitempty"`
	// PublicEndpointAccess is a pointer because Terraform reads an absent value as true.
	PublicEndpointAccess *bool  `json:"publicEndpointAccess,omitempty"`
	PrometheusEndpoint   string `json:"prometheusEndpoint,omitempty"`
}

// CloudDetail is one cloud provider entry of a subscription.
type CloudDetail struct {
	Provider       string        `json:"provider"`
	CloudAccountID int           `json:"cloudAccountId"`
	AWSAccountID   string        `json:"awsAccountId,omitempty"`
	TotalSizeInGB  float64       `json:"totalSizeInGb"`
	Regions        []CloudRegion `json:"regions"`
	ResourceTags   []Tag         `json:"resourceTags,omitempty"`
}

// CloudRegion is a region of a subscription as GET shows it. Networking is an array
// here, where the create body has an object.
type CloudRegion struct {
	Region                     string       `json:"region"`
	Networking                 []Networking `json:"networking"`
	PreferredAvailabilityZones []string     `json:"preferredAvailabilityZones"`
	MultipleAvailabilityZones  bool         `json:"multipleAvailabilityZones"`
}

// Networking is one network placement of a region.
type Networking struct {
	DeploymentCIDR string `json:"deploymentCIDR"`
	VPCID          string `json:"vpcId,omitempty"`
	SubnetID       string `json:"subnetId,omitempty"`
}

// CMKAccessInfo is customerManagedKeyAccessDetails.
type CMKAccessInfo struct {
	RedisServiceAccount     string   `json:"redisServiceAccount,omitempty"`
	GooglePredefinedRoles   []string `json:"googlePredefinedRoles,omitempty"`
	GoogleCustomPermissions []string `json:"googleCustomPermissions,omitempty"`
	RedisIAMRole            string   `json:"redisIamRole,omitempty"`
}

// SubscriptionList is GET /subscriptions.
type SubscriptionList struct {
	AccountID     int            `json:"accountId"`
	Subscriptions []Subscription `json:"subscriptions"`
}

// CreateSubscription is the POST /subscriptions body. Every field is omitted when unset.
type CreateSubscription struct {
	Name                            *string                      `json:"name,omitempty"`
	DeploymentType                  *string                      `json:"deploymentType,omitempty"`
	DryRun                          *bool                        `json:"dryRun,omitempty"`
	PaymentMethodID                 *int                         `json:"paymentMethodId,omitempty"`
	PaymentMethod                   *string                      `json:"paymentMethod,omitempty"`
	MemoryStorage                   *string                      `json:"memoryStorage,omitempty"`
	CloudProviders                  []CreateCloudProvider        `json:"cloudProviders,omitempty"`
	Databases                       []CreateSubscriptionDatabase `json:"databases,omitempty"`
	RedisVersion                    *string                      `json:"redisVersion,omitempty"`
	PersistentStorageEncryptionType *string                      `json:"persistentStorageEncryptionType,omitempty"`
	PublicEndpointAccess            *bool                        `json:"publicEndpointAccess,omitempty"`
}

// CreateCloudProvider is a cloudProviders[] entry of a create body.
type CreateCloudProvider struct {
	Provider       *string        `json:"provider,omitempty"`
	CloudAccountID *int           `json:"cloudAccountId,omitempty"`
	Regions        []CreateRegion `json:"regions,omitempty"`
	ResourceTags   []Tag          `json:"resourceTags,omitempty"`
}

// CreateRegion is a regions[] entry of a create body.
type CreateRegion struct {
	Region                     *string           `json:"region,omitempty"`
	MultipleAvailabilityZones  *bool             `json:"multipleAvailabilityZones,omitempty"`
	PreferredAvailabilityZones []string          `json:"preferredAvailabilityZones,omitempty"`
	Networking                 *CreateNetworking `json:"networking,omitempty"`
}

// CreateNetworking is the networking object of a create body.
type CreateNetworking struct {
	DeploymentCIDR *string `json:"deploymentCIDR,omitempty"`
	VPCID          *string `json:"vpcId,omitempty"`
}

// CreateSubscriptionDatabase is a creation-plan database. It has no password: the
// server generates one.
type CreateSubscriptionDatabase struct {
	Name                       *string           `json:"name,omitempty"`
	Protocol                   *string           `json:"protocol,omitempty"`
	MemoryLimitInGB            *float64          `json:"memoryLimitInGb,omitempty"`
	DatasetSizeInGB            *float64          `json:"datasetSizeInGb,omitempty"`
	SupportOSSClusterAPI       *bool             `json:"supportOSSClusterApi,omitempty"`
	DataPersistence            *string           `json:"dataPersistence,omitempty"`
	Replication                *bool             `json:"replication,omitempty"`
	ThroughputMeasurement      *Throughput       `json:"throughputMeasurement,omitempty"`
	LocalThroughputMeasurement []LocalThroughput `json:"localThroughputMeasurement,omitempty"`
	Modules                    []Module          `json:"modules,omitempty"`
	Quantity                   *int              `json:"quantity,omitempty"`
	AverageItemSizeInBytes     *int              `json:"averageItemSizeInBytes,omitempty"`
	RAMPercentage              *int              `json:"ramPercentage,omitempty"`
	QueryPerformanceFactor     *string           `json:"queryPerformanceFactor,omitempty"`
	// RedisVersion is in the OpenAPI, not in the official client: it overrides the
	// subscription's redisVersion for this entry.
	RedisVersion *string `json:"redisVersion,omitempty"`
}

// LocalThroughput is a localThroughputMeasurement entry; its two counts are sent as null
// when unset, as the official client does.
type LocalThroughput struct {
	Region                   *string `json:"region,omitempty"`
	WriteOperationsPerSecond *int    `json:"writeOperationsPerSecond"`
	ReadOperationsPerSecond  *int    `json:"readOperationsPerSecond"`
}

// UpdateSubscription is the PUT /subscriptions/{id} body, in its plain or its
// customer-managed-key form. Unset fields mean "no change".
type UpdateSubscription struct {
	Name                 *string              `json:"name,omitempty"`
	PaymentMethodID      *int                 `json:"paymentMethodId,omitempty"`
	PaymentMethod        *string              `json:"paymentMethod,omitempty"`
	PublicEndpointAccess *bool                `json:"publicEndpointAccess,omitempty"`
	DeletionGracePeriod  *string              `json:"deletionGracePeriod,omitempty"`
	CustomerManagedKeys  []CustomerManagedKey `json:"customerManagedKeys,omitempty"`
}

// CustomerManagedKey is an entry of the CMK update.
type CustomerManagedKey struct {
	ResourceName string `json:"resourceName"`
	Region       string `json:"region,omitempty"`
}

// RedisVersion is an entry of GET /subscriptions/redis-versions.
type RedisVersion struct {
	Version   string `json:"version"`
	EOLDate   string `json:"eolDate"`
	IsPreview bool   `json:"isPreview"`
	IsDefault bool   `json:"isDefault"`
}

// MaintenanceWindows is GET /subscriptions/{id}/maintenance-windows.
type MaintenanceWindows struct {
	Mode    string              `json:"mode"`
	Windows []MaintenanceWindow `json:"windows"`
}

// MaintenanceWindow is one weekly window.
type MaintenanceWindow struct {
	StartHour       int      `json:"startHour"`
	DurationInHours int      `json:"durationInHours"`
	Days            []string `json:"days"`
}

// Pricing is an entry of GET /subscriptions/{id}/pricing.
type Pricing struct {
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

// Tag is a key/value label.
type Tag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// ListSubscriptions lists the account's subscriptions.
func (c *Client) ListSubscriptions(ctx context.Context) (*SubscriptionList, error) {
	var out SubscriptionList
	if err := c.Do(ctx, http.MethodGet, "/subscriptions", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetSubscription reads one subscription; IsNotFound(err) when it is gone.
func (c *Client) GetSubscription(ctx context.Context, id int) (*Subscription, error) {
	var out Subscription
	if err := c.Do(ctx, http.MethodGet, pathf("/subscriptions/%d", id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateSubscription submits a subscription create; the task's resourceId is its id.
func (c *Client) CreateSubscription(ctx context.Context, req CreateSubscription) (*Task, error) {
	return c.task(ctx, http.MethodPost, "/subscriptions", req)
}

// UpdateSubscription submits a subscription update.
func (c *Client) UpdateSubscription(ctx context.Context, id int, req UpdateSubscription) (*Task, error) {
	return c.task(ctx, http.MethodPut, pathf("/subscriptions/%d", id), req)
}

// DeleteSubscription submits a subscription delete; its databases must be deleted first.
func (c *Client) DeleteSubscription(ctx context.Context, id int) (*Task, error) {
	return c.task(ctx, http.MethodDelete, pathf("/subscriptions/%d", id), nil)
}

// RedisVersions lists the Redis versions a subscription can run (all of them when
// subscriptionID is 0). It sends a real query string; the official client's
// percent-encoded form is reachable through Do.
func (c *Client) RedisVersions(ctx context.Context, subscriptionID int) ([]RedisVersion, error) {
	path := "/subscriptions/redis-versions"
	if subscriptionID != 0 {
		path += pathf("?subscriptionId=%d", subscriptionID)
	}
	var out struct {
		RedisVersions []RedisVersion `json:"redisVersions"`
	}
	if err := c.Do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out.RedisVersions, nil
}

// GetMaintenanceWindows reads a subscription's maintenance windows.
func (c *Client) GetMaintenanceWindows(ctx context.Context, id int) (*MaintenanceWindows, error) {
	var out MaintenanceWindows
	if err := c.Do(ctx, http.MethodGet, pathf("/subscriptions/%d/maintenance-windows", id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetPricing reads a subscription's pricing.
func (c *Client) GetPricing(ctx context.Context, id int) ([]Pricing, error) {
	var out struct {
		Pricing []Pricing `json:"pricing"`
	}
	if err := c.Do(ctx, http.MethodGet, pathf("/subscriptions/%d/pricing", id), nil, &out); err != nil {
		return nil, err
	}
	return out.Pricing, nil
}

// WaitForSubscriptionStatus polls a subscription until it has the status and returns
// it. Reaching "error" instead fails at once, as it does in Terraform's waiter, rather
// than waiting for ctx to expire.
func (c *Client) WaitForSubscriptionStatus(ctx context.Context, id int, status string) (*Subscription, error) {
	for {
		s, err := c.GetSubscription(ctx, id)
		if err != nil {
			return nil, err
		}
		if s.Status == status {
			return s, nil
		}
		if s.Status == SubscriptionError {
			return s, fmt.Errorf("subscription %d is in error while waiting for %s", id, status)
		}
		if err := c.sleep(ctx); err != nil {
			return s, fmt.Errorf("waiting for subscription %d to be %s (it is %s): %w", id, status, s.Status, err)
		}
	}
}

// WaitForSubscriptionGone polls a deleted subscription until GET answers 404, which is
// how Terraform learns that a delete has been provisioned.
func (c *Client) WaitForSubscriptionGone(ctx context.Context, id int) error {
	for {
		s, err := c.GetSubscription(ctx, id)
		if IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := c.sleep(ctx); err != nil {
			return fmt.Errorf("waiting for subscription %d to be gone (it is %s): %w", id, s.Status, err)
		}
	}
}

// task sends an asynchronous request and returns the received task.
func (c *Client) task(ctx context.Context, method, path string, body any) (*Task, error) {
	var raw json.RawMessage
	if err := c.Do(ctx, method, path, body, &raw); err != nil {
		return nil, err
	}
	t := Task{Raw: raw}
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	if t.ID == "" {
		// The official client dereferences taskId without a check; fail clearly instead.
		return nil, fmt.Errorf("%s %s: the answer has no taskId", method, path)
	}
	return &t, nil
}
