package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Database statuses clouddb uses (the official client knows more).
const (
	DatabasePending       = "pending"
	DatabaseActive        = "active"
	DatabaseChangePending = "active-change-pending"
	DatabaseError         = "error"
)

// Database is GET /subscriptions/{s}/databases/{d} (and each element of the list).
// throughputMeasurement, clustering and security are pointers so that a caller can tell
// an absent object (which Terraform would dereference and crash on) from a zero one.
type Database struct {
	ID                                  int         `json:"databaseId"`
	Name                                string      `json:"name"`
	Protocol                            string      `json:"protocol"`
	Provider                            string      `json:"provider,omitempty"`
	Region                              string      `json:"region,omitempty"`
	Status                              string      `json:"status"`
	StatusDetail                        string      `json:"statusDetail,omitempty"`
	MemoryLimitInGB                     float64     `json:"memoryLimitInGb"`
	DatasetSizeInGB                     float64     `json:"datasetSizeInGb"`
	MemoryUsedInMB                      float64     `json:"memoryUsedInMb"`
	SupportOSSClusterAPI                bool        `json:"supportOSSClusterApi"`
	UseExternalEndpointForOSSClusterAPI bool        `json:"useExternalEndpointForOSSClusterApi"`
	RespVersion                         string      `json:"respVersion,omitempty"`
	DataPersistence                     string      `json:"dataPersistence"`
	Replication                         bool        `json:"replication"`
	DataEvictionPolicy                  string      `json:"dataEvictionPolicy"`
	ThroughputMeasurement               *Throughput `json:"throughputMeasurement"`
	ReplicaOf                           *ReplicaOf  `json:"replicaOf,omitempty"`
	Clustering                          *Clustering `json:"clustering"`
	Security                            *Security   `json:"security"`
	Modules                             []Module    `json:"modules"`
	Alerts                              []Alert     `json:"alerts"`
	// ActivatedOn and LastModified are absent rather than "" when unknown: the official
	// client decodes them as time.Time.
	ActivatedOn             *time.Time `json:"activatedOn,omitempty"`
	LastModified            *time.Time `json:"lastModified,omitempty"`
	MemoryStorage           string     `json:"memoryStorage,omitempty"`
	PrivateEndpoint         string     `json:"privateEndpoint"`
	PublicEndpoint          string     `json:"publicEndpoint"`
	RedisVersion            string     `json:"redisVersion,omitempty"`
	RedisVersionCompliance  string     `json:"redisVersionCompliance,omitempty"`
	Backup                  *Backup    `json:"backup,omitempty"`
	PeriodicBackupPath      string     `json:"periodicBackupPath,omitempty"`
	QueryPerformanceFactor  string     `json:"queryPerformanceFactor,omitempty"`
	AutoMinorVersionUpgrade bool       `json:"autoMinorVersionUpgrade"`
	RAMPercentage           int        `json:"ramPercentage,omitempty"`
	AverageItemSizeInBytes  int        `json:"averageItemSizeInBytes,omitempty"`
	// ActiveActiveRedis is absent for single-region databases.
	ActiveActiveRedis *bool `json:"activeActiveRedis,omitempty"`
}

// Throughput is throughputMeasurement, in requests and responses alike.
type Throughput struct {
	By    string `json:"by"`
	Value int    `json:"value"`
}

// ReplicaOf is the response form of a database's replica sources (the request form is a
// plain array of URIs).
type ReplicaOf struct {
	Endpoints []string `json:"endpoints"`
}

// Clustering is a database's sharding configuration.
type Clustering struct {
	NumberOfShards int         `json:"numberOfShards"`
	RegexRules     []RegexRule `json:"regexRules"`
	HashingPolicy  string      `json:"hashingPolicy,omitempty"`
}

// RegexRule is a hashing rule.
type RegexRule struct {
	Ordinal int    `json:"ordinal"`
	Pattern string `json:"pattern"`
}

// Security is a database's security settings. The three booleans Terraform dereferences
// are pointers so that their presence can be checked.
type Security struct {
	EnableDefaultUser       *bool    `json:"enableDefaultUser"`
	SSLClientAuthentication *bool    `json:"sslClientAuthentication,omitempty"`
	TLSClientAuthentication *bool    `json:"tlsClientAuthentication"`
	EnableTLS               *bool    `json:"enableTls"`
	SourceIPs               []string `json:"sourceIps"`
	Password                string   `json:"password,omitempty"`
}

// Backup is the response form of remote backup settings.
type Backup struct {
	EnableRemoteBackup bool   `json:"enableRemoteBackup"`
	Interval           string `json:"interval"`
	TimeUTC            string `json:"timeUTC"`
	Destination        string `json:"destination,omitempty"`
}

// RemoteBackup is the request form of remote backup settings.
type RemoteBackup struct {
	Active      *bool   `json:"active,omitempty"`
	Interval    *string `json:"interval,omitempty"`
	TimeUTC     *string `json:"timeUTC,omitempty"`
	StorageType *string `json:"storageType,omitempty"`
	StoragePath *string `json:"storagePath,omitempty"`
}

// Alert is a database alert setting.
type Alert struct {
	Name  string `json:"name"`
	Value int    `json:"value"`
}

// Module is a Redis module: {name} in requests; GET /database-modules adds the rest.
type Module struct {
	Name           string            `json:"name"`
	CapabilityName string            `json:"capabilityName,omitempty"`
	Description    string            `json:"description,omitempty"`
	Parameters     []ModuleParameter `json:"parameters,omitempty"`
}

// ModuleParameter is a parameter of a module.
type ModuleParameter struct {
	Name         string `json:"name"`
	Description  string `json:"description,omitempty"`
	Type         string `json:"type,omitempty"`
	DefaultValue *int   `json:"defaultValue,omitempty"`
	Required     bool   `json:"required"`
}

// DatabaseList is one page of GET /subscriptions/{s}/databases. The real API puts the
// page inside a one-element subscription array.
type DatabaseList struct {
	AccountID    int                        `json:"accountId"`
	Subscription []DatabaseListSubscription `json:"subscription"`
}

// DatabaseListSubscription is the subscription entry of a database page.
type DatabaseListSubscription struct {
	SubscriptionID    int        `json:"subscriptionId"`
	NumberOfDatabases int        `json:"numberOfDatabases"`
	Databases         []Database `json:"databases"`
}

// CreateDatabase is the POST /subscriptions/{s}/databases body. Every field is omitted
// when unset.
type CreateDatabase struct {
	DryRun                              *bool         `json:"dryRun,omitempty"`
	Name                                *string       `json:"name,omitempty"`
	Protocol                            *string       `json:"protocol,omitempty"`
	MemoryLimitInGB                     *float64      `json:"memoryLimitInGb,omitempty"`
	DatasetSizeInGB                     *float64      `json:"datasetSizeInGb,omitempty"`
	SupportOSSClusterAPI                *bool         `json:"supportOSSClusterApi,omitempty"`
	RespVersion                         *string       `json:"respVersion,omitempty"`
	UseExternalEndpointForOSSClusterAPI *bool         `json:"useExternalEndpointForOSSClusterApi,omitempty"`
	DataPersistence                     *string       `json:"dataPersistence,omitempty"`
	DataEvictionPolicy                  *string       `json:"dataEvictionPolicy,omitempty"`
	Replication                         *bool         `json:"replication,omitempty"`
	ThroughputMeasurement               *Throughput   `json:"throughputMeasurement,omitempty"`
	AverageItemSizeInBytes              *int          `json:"averageItemSizeInBytes,omitempty"`
	RAMPercentage                       *int          `json:"ramPercentage,omitempty"`
	ReplicaOf                           []string      `json:"replicaOf,omitempty"`
	PeriodicBackupPath                  *string       `json:"periodicBackupPath,omitempty"`
	SourceIP                            []string      `json:"sourceIp,omitempty"`
	ClientSSLCertificate                *string       `json:"clientSslCertificate,omitempty"`
	ClientTLSCertificates               *[]string     `json:"clientTlsCertificates,omitempty"`
	Password                            *string       `json:"password,omitempty"`
	Alerts                              []Alert       `json:"alerts,omitempty"`
	Modules                             []Module      `json:"modules,omitempty"`
	EnableTLS                           *bool         `json:"enableTls,omitempty"`
	Port                                *int          `json:"port,omitempty"`
	RemoteBackup                        *RemoteBackup `json:"remoteBackup,omitempty"`
	QueryPerformanceFactor              *string       `json:"queryPerformanceFactor,omitempty"`
	RedisVersion                        *string       `json:"redisVersion,omitempty"`
	AutoMinorVersionUpgrade             *bool         `json:"autoMinorVersionUpgrade,omitempty"`
}

// UpdateDatabase is the PUT /subscriptions/{s}/databases/{d} body. Unset fields mean "no
// change". ReplicaOf is always serialised, as null when nil, because the official client
// does so and the server must read null as "no change"; an empty non-nil slice clears
// the sources. Alerts and ClientTLSCertificates are pointers so that an empty list (clear
// all) can be told from an absent one.
type UpdateDatabase struct {
	DryRun                              *bool         `json:"dryRun,omitempty"`
	Name                                *string       `json:"name,omitempty"`
	MemoryLimitInGB                     *float64      `json:"memoryLimitInGb,omitempty"`
	DatasetSizeInGB                     *float64      `json:"datasetSizeInGb,omitempty"`
	SupportOSSClusterAPI                *bool         `json:"supportOSSClusterApi,omitempty"`
	RespVersion                         *string       `json:"respVersion,omitempty"`
	UseExternalEndpointForOSSClusterAPI *bool         `json:"useExternalEndpointForOSSClusterApi,omitempty"`
	DataEvictionPolicy                  *string       `json:"dataEvictionPolicy,omitempty"`
	Replication                         *bool         `json:"replication,omitempty"`
	ThroughputMeasurement               *Throughput   `json:"throughputMeasurement,omitempty"`
	RegexRules                          []string      `json:"regexRules,omitempty"`
	DataPersistence                     *string       `json:"dataPersistence,omitempty"`
	ReplicaOf                           []string      `json:"replicaOf"`
	PeriodicBackupPath                  *string       `json:"periodicBackupPath,omitempty"`
	SourceIP                            []string      `json:"sourceIp,omitempty"`
	ClientSSLCertificate                *string       `json:"clientSslCertificate,omitempty"`
	ClientTLSCertificates               *[]string     `json:"clientTlsCertificates,omitempty"`
	Password                            *string       `json:"password,omitempty"`
	Alerts                              *[]Alert      `json:"alerts,omitempty"`
	EnableTLS                           *bool         `json:"enableTls,omitempty"`
	RemoteBackup                        *RemoteBackup `json:"remoteBackup,omitempty"`
	EnableDefaultUser                   *bool         `json:"enableDefaultUser,omitempty"`
	QueryPerformanceFactor              *string       `json:"queryPerformanceFactor,omitempty"`
	AutoMinorVersionUpgrade             *bool         `json:"autoMinorVersionUpgrade,omitempty"`
	RAMPercentage                       *int          `json:"ramPercentage,omitempty"`
}

// Import is the POST .../import body.
type Import struct {
	SourceType    *string  `json:"sourceType,omitempty"`
	ImportFromURI []string `json:"importFromUri,omitempty"`
}

func databasePath(subID, dbID int) string {
	return pathf("/subscriptions/%d/databases/%d", subID, dbID)
}

// ListDatabases reads one page of a subscription's databases.
func (c *Client) ListDatabases(ctx context.Context, subID, limit, offset int) (*DatabaseList, error) {
	var out DatabaseList
	path := pathf("/subscriptions/%d/databases?limit=%d&offset=%d", subID, limit, offset)
	if err := c.Do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// allDatabasesPage is the page size of AllDatabases, the official client's.
const allDatabasesPage = 100

// AllDatabases reads every database of a subscription the way the official client does:
// pages of 100 until an empty page (or a 404 past the first page). Like it, it fails when
// a page does not hold exactly one subscription entry for subID, because a server that
// ignored the paging would otherwise make it loop forever.
func (c *Client) AllDatabases(ctx context.Context, subID int) ([]Database, error) {
	var all []Database
	for offset := 0; ; offset += allDatabasesPage {
		page, err := c.ListDatabases(ctx, subID, allDatabasesPage, offset)
		if offset > 0 && IsNotFound(err) {
			return all, nil
		}
		if err != nil {
			return nil, err
		}
		if len(page.Subscription) != 1 || page.Subscription[0].SubscriptionID != subID {
			return nil, fmt.Errorf("list databases of subscription %d: server didn't respond with just a single subscription", subID)
		}
		dbs := page.Subscription[0].Databases
		if len(dbs) == 0 {
			return all, nil
		}
		all = append(all, dbs...)
	}
}

// GetDatabase reads one database; IsNotFound(err) when it is gone.
func (c *Client) GetDatabase(ctx context.Context, subID, dbID int) (*Database, error) {
	var out Database
	if err := c.Do(ctx, http.MethodGet, databasePath(subID, dbID), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateDatabase submits a database create; the task's resourceId is its id.
func (c *Client) CreateDatabase(ctx context.Context, subID int, req CreateDatabase) (*Task, error) {
	return c.task(ctx, http.MethodPost, pathf("/subscriptions/%d/databases", subID), req)
}

// UpdateDatabase submits a database update.
func (c *Client) UpdateDatabase(ctx context.Context, subID, dbID int, req UpdateDatabase) (*Task, error) {
	return c.task(ctx, http.MethodPut, databasePath(subID, dbID), req)
}

// DeleteDatabase submits a database delete.
func (c *Client) DeleteDatabase(ctx context.Context, subID, dbID int) (*Task, error) {
	return c.task(ctx, http.MethodDelete, databasePath(subID, dbID), nil)
}

// BackupDatabase submits an on-demand backup. Like the official client it sends no body.
func (c *Client) BackupDatabase(ctx context.Context, subID, dbID int) (*Task, error) {
	return c.task(ctx, http.MethodPost, databasePath(subID, dbID)+"/backup", nil)
}

// BackupStatus asks for the latest backup's status; the answer is a task whose completed
// response.resource holds it.
func (c *Client) BackupStatus(ctx context.Context, subID, dbID int) (*Task, error) {
	return c.task(ctx, http.MethodGet, databasePath(subID, dbID)+"/backup", nil)
}

// ImportDatabase submits an import into an existing database.
func (c *Client) ImportDatabase(ctx context.Context, subID, dbID int, req Import) (*Task, error) {
	return c.task(ctx, http.MethodPost, databasePath(subID, dbID)+"/import", req)
}

// ImportStatus asks for the latest import's status, as a task like BackupStatus.
func (c *Client) ImportStatus(ctx context.Context, subID, dbID int) (*Task, error) {
	return c.task(ctx, http.MethodGet, databasePath(subID, dbID)+"/import", nil)
}

// DatabaseTags is the body of the database tags endpoints.
type DatabaseTags struct {
	Tags []Tag `json:"tags"`
}

// GetDatabaseTags reads a database's tags.
func (c *Client) GetDatabaseTags(ctx context.Context, subID, dbID int) ([]Tag, error) {
	var out DatabaseTags
	if err := c.Do(ctx, http.MethodGet, databasePath(subID, dbID)+"/tags", nil, &out); err != nil {
		return nil, err
	}
	return out.Tags, nil
}

// PutDatabaseTags replaces a database's tags (synchronously). A nil slice is sent as []
// and clears them, as Terraform does.
func (c *Client) PutDatabaseTags(ctx context.Context, subID, dbID int, tags []Tag) ([]Tag, error) {
	if tags == nil {
		tags = []Tag{}
	}
	var out DatabaseTags
	if err := c.Do(ctx, http.MethodPut, databasePath(subID, dbID)+"/tags", DatabaseTags{Tags: tags}, &out); err != nil {
		return nil, err
	}
	return out.Tags, nil
}

// WaitForDatabaseStatus polls a database until it has the status and returns it;
// reaching "error" instead fails at once.
func (c *Client) WaitForDatabaseStatus(ctx context.Context, subID, dbID int, status string) (*Database, error) {
	for {
		d, err := c.GetDatabase(ctx, subID, dbID)
		if err != nil {
			return nil, err
		}
		if d.Status == status {
			return d, nil
		}
		if d.Status == DatabaseError {
			return d, fmt.Errorf("database %d is in error while waiting for %s: %s", dbID, status, d.StatusDetail)
		}
		if err := c.sleep(ctx); err != nil {
			return d, fmt.Errorf("waiting for database %d to be %s (it is %s): %w", dbID, status, d.Status, err)
		}
	}
}

// Upgrade is the POST …/databases/{d}/upgrade body.
type Upgrade struct {
	TargetRedisVersion *string `json:"targetRedisVersion,omitempty"`
}

// UpgradeDatabase submits a Redis version upgrade of a database; the task completes with
// an empty response and the database goes through its pending status.
func (c *Client) UpgradeDatabase(ctx context.Context, subID, dbID int, req Upgrade) (*Task, error) {
	return c.task(ctx, http.MethodPost, databasePath(subID, dbID)+"/upgrade", req)
}

// UpgradeStatus is GET …/databases/{d}/upgrade.
type UpgradeStatus struct {
	DatabaseID         int     `json:"databaseId"`
	TargetRedisVersion string  `json:"targetRedisVersion"`
	Progress           float64 `json:"progress"`
	UpgradeStatus      string  `json:"upgradeStatus"`
}

// GetUpgradeStatus reads the status of a database's latest upgrade.
func (c *Client) GetUpgradeStatus(ctx context.Context, subID, dbID int) (*UpgradeStatus, error) {
	var out UpgradeStatus
	if err := c.Do(ctx, http.MethodGet, databasePath(subID, dbID)+"/upgrade", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AvailableTargetVersions lists the versions a database may be upgraded to.
func (c *Client) AvailableTargetVersions(ctx context.Context, subID, dbID int) ([]string, error) {
	var out struct {
		Targets []struct {
			RedisVersion string `json:"redisVersion"`
		} `json:"targets"`
	}
	if err := c.Do(ctx, http.MethodGet, databasePath(subID, dbID)+"/available-target-versions", nil, &out); err != nil {
		return nil, err
	}
	versions := make([]string, 0, len(out.Targets))
	for _, t := range out.Targets {
		versions = append(versions, t.RedisVersion)
	}
	return versions, nil
}

// DryRunPricing is the pricing a completed dry run (dryRun: true on a subscription or
// database create, or a database update) reports in its response.resource.
func (t *Task) DryRunPricing() ([]Pricing, error) {
	if t.Response == nil || len(t.Response.Resource) == 0 {
		return nil, fmt.Errorf("task %s has no response.resource", t.ID)
	}
	var out struct {
		Pricing []Pricing `json:"pricing"`
	}
	if err := json.Unmarshal(t.Response.Resource, &out); err != nil {
		return nil, fmt.Errorf("task %s: decode response.resource: %w", t.ID, err)
	}
	return out.Pricing, nil
}

// DatabaseCertificate is the CA certificate a client trusts to reach a TLS database.
type DatabaseCertificate struct {
	PublicCertificatePEMString string `json:"publicCertificatePEMString"`
}

// GetDatabaseCertificate returns the CA certificate (PEM) that signed the database's
// server certificate.
func (c *Client) GetDatabaseCertificate(ctx context.Context, subID, dbID int) (*DatabaseCertificate, error) {
	var out DatabaseCertificate
	if err := c.Do(ctx, http.MethodGet, databasePath(subID, dbID)+"/certificate", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
