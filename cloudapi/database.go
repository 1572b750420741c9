package cloudapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"clouddb"
)

func (s *Server) registerDatabaseRoutes() {
	const db = "/subscriptions/{subscriptionId}/databases/{databaseId}"
	s.route("GET /subscriptions/{subscriptionId}/databases", s.listDatabases)
	s.route("POST /subscriptions/{subscriptionId}/databases", s.createDatabase)
	s.route("GET "+db, s.getDatabase)
	s.route("PUT "+db, s.updateDatabase)
	s.route("DELETE "+db, s.deleteDatabase)
	s.route("GET "+db+"/tags", s.getDatabaseTags)
	s.route("GET "+db+"/certificate", s.getDatabaseCertificate)
	s.route("PUT "+db+"/tags", s.putDatabaseTags)
	// These GETs create a task each time.
	s.routeUncached("GET "+db+"/backup", s.statusTask(clouddb.CommandDatabaseBackupStatus))
	s.routeUncached("GET "+db+"/import", s.statusTask(clouddb.CommandDatabaseImportStatus))
	s.route("POST "+db+"/backup", s.backupDatabase)
	s.route("POST "+db+"/import", s.importDatabase)
	s.route("POST "+db+"/upgrade", s.upgradeDatabase)
	s.route("GET "+db+"/upgrade", s.getUpgrade)
	s.route("GET "+db+"/available-target-versions", s.availableTargetVersions)
}

// versions are the Redis versions offered.
func (s *Server) versions() clouddb.RedisVersions { return s.RedisVersions.OrDefault() }

// upgradeDatabase moves a database to a newer Redis version (task
// databaseUpgradeRequest, HTTP 200 like the real API). The task checks the target.
func (s *Server) upgradeDatabase(r *http.Request, c *caller) (int, any, error) {
	sub, d, err := s.withDatabase(r, c)
	if err != nil {
		return 0, nil, err
	}
	var body clouddb.UpgradeRequest
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	return s.enqueue(r, c, http.StatusOK, &clouddb.Task{CommandType: clouddb.CommandDatabaseUpgrade, SubscriptionID: sub.ID, DatabaseID: d.ID}, body)
}

type upgradeView struct {
	DatabaseID         int     `json:"databaseId"`
	TargetRedisVersion string  `json:"targetRedisVersion"`
	Progress           float64 `json:"progress"`
	UpgradeStatus      string  `json:"upgradeStatus"`
}

// getUpgrade reports the database's latest upgrade by its own outcome (see
// clouddb.UpgradeState): a change or a failure of the database after the upgrade went
// through does not show here. A database never upgraded has no upgrade to report (404).
func (s *Server) getUpgrade(r *http.Request, c *caller) (int, any, error) {
	_, d, err := s.withDatabase(r, c)
	if err != nil {
		return 0, nil, err
	}
	u := d.State.Upgrade
	if u == nil {
		return 0, nil, clouddb.NotFound(clouddb.ErrTypeNotFound, "database %d has not been upgraded (POST …/databases/%d/upgrade)", d.ID, d.ID)
	}
	status := u.Status
	if status == "" {
		// A record from before upgrades kept their outcome: the database's status is
		// the best there is.
		switch d.Status {
		case clouddb.DatabaseActive:
			status = clouddb.UpgradeDone
		case clouddb.DatabaseError:
			status = clouddb.UpgradeFailed
		default:
			status = clouddb.UpgradeInProgress
		}
	}
	v := upgradeView{DatabaseID: d.ID, TargetRedisVersion: u.Target, UpgradeStatus: status}
	if status == clouddb.UpgradeDone {
		v.Progress = 100
	}
	return http.StatusOK, v, nil
}

type targetVersionView struct {
	RedisVersion string `json:"redisVersion"`
}

// availableTargetVersions lists the offered versions newer than the database's: the
// targets an upgrade takes.
func (s *Server) availableTargetVersions(r *http.Request, c *caller) (int, any, error) {
	_, d, err := s.withDatabase(r, c)
	if err != nil {
		return 0, nil, err
	}
	versions := s.versions()
	targets := []targetVersionView{}
	for _, v := range versions.Newer(versions.Resolve(d.Spec.RedisVersion)) {
		targets = append(targets, targetVersionView{RedisVersion: v})
	}
	return http.StatusOK, map[string]any{"targets": targets}, nil
}

// createDatabaseRequest is the create body. clientTlsCertificates comes as PEM strings
// (Go client) or as objects (OpenAPI); replicaOf is answered at the HTTP layer.
type createDatabaseRequest struct {
	clouddb.DatabaseSpec
	ClientTLSCertificates tlsCertificates `json:"clientTlsCertificates"`
	ReplicaOf             *[]string       `json:"replicaOf"`
}

type updateDatabaseRequest struct {
	clouddb.DatabaseUpdate
	ClientTLSCertificates certificatesUpdate `json:"clientTlsCertificates"`
	// ReplicaOf is always sent by the Go client; null means "no change".
	ReplicaOf *[]string `json:"replicaOf"`
}

// tlsCertificates accepts ["PEM", …] and [{"publicCertificatePEMString": "PEM"}, …].
type tlsCertificates []string

func (t *tlsCertificates) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return &fieldError{"clientTlsCertificates", "expected an array of PEM strings or of {publicCertificatePEMString} objects"}
	}
	out := make(tlsCertificates, 0, len(raw))
	for _, r := range raw {
		var pem string
		if err := json.Unmarshal(r, &pem); err != nil {
			var obj struct {
				PEM *string `json:"publicCertificatePEMString"`
			}
			if err := json.Unmarshal(r, &obj); err != nil || obj.PEM == nil {
				return &fieldError{"clientTlsCertificates", "expected an array of PEM strings or of {publicCertificatePEMString} objects"}
			}
			pem = *obj.PEM
		}
		out = append(out, pem)
	}
	*t = out
	return nil
}

// backupRequest is the optional body of POST …/backup; the real clients send none.
type backupRequest struct {
	RegionName      string `json:"regionName,omitempty"`
	AdhocBackupPath string `json:"adhocBackupPath,omitempty"`
}

// backupDatabase starts an on-demand backup to the database's backup path (or the
// request's adhocBackupPath); the task completes when the file is complete.
func (s *Server) backupDatabase(r *http.Request, c *caller) (int, any, error) {
	sub, d, err := s.withDatabase(r, c)
	if err != nil {
		return 0, nil, err
	}
	var body backupRequest
	if err := decodeOptionalBody(r, &body); err != nil {
		return 0, nil, err
	}
	var payload any
	if body.AdhocBackupPath != "" {
		payload = body
	}
	return s.enqueue(r, c, http.StatusOK, &clouddb.Task{CommandType: clouddb.CommandDatabaseBackup, SubscriptionID: sub.ID, DatabaseID: d.ID}, payload)
}

// importDatabase replaces the database's data with that of the sources; the task
// completes when the data is in.
func (s *Server) importDatabase(r *http.Request, c *caller) (int, any, error) {
	sub, d, err := s.withDatabase(r, c)
	if err != nil {
		return 0, nil, err
	}
	var body clouddb.ImportRequest
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	return s.enqueue(r, c, http.StatusOK, &clouddb.Task{CommandType: clouddb.CommandDatabaseImport, SubscriptionID: sub.ID, DatabaseID: d.ID}, body)
}

// statusTask answers GET …/backup and GET …/import: like the real API, with a task whose
// response.resource reports the latest backup or import.
func (s *Server) statusTask(command string) handler {
	return func(r *http.Request, c *caller) (int, any, error) {
		sub, d, err := s.withDatabase(r, c)
		if err != nil {
			return 0, nil, err
		}
		return s.enqueue(r, c, http.StatusOK, &clouddb.Task{CommandType: command, SubscriptionID: sub.ID, DatabaseID: d.ID}, nil)
	}
}

type databaseView struct {
	DatabaseID                          int                `json:"databaseId"`
	Name                                string             `json:"name"`
	Protocol                            string             `json:"protocol"`
	Provider                            string             `json:"provider"`
	Region                              string             `json:"region"`
	RedisVersion                        string             `json:"redisVersion"`
	RedisVersionCompliance              string             `json:"redisVersionCompliance"`
	RespVersion                         string             `json:"respVersion"`
	Status                              string             `json:"status"`
	StatusDetail                        string             `json:"statusDetail,omitempty"`
	MemoryLimitInGB                     float64            `json:"memoryLimitInGb"`
	DatasetSizeInGB                     float64            `json:"datasetSizeInGb"`
	MemoryUsedInMB                      float64            `json:"memoryUsedInMb"`
	MemoryStorage                       string             `json:"memoryStorage"`
	SupportOSSClusterAPI                bool               `json:"supportOSSClusterApi"`
	UseExternalEndpointForOSSClusterAPI bool               `json:"useExternalEndpointForOSSClusterApi"`
	DataPersistence                     string             `json:"dataPersistence"`
	Replication                         bool               `json:"replication"`
	DataEvictionPolicy                  string             `json:"dataEvictionPolicy"`
	ThroughputMeasurement               clouddb.Throughput `json:"throughputMeasurement"`
	ActivatedOn                         string             `json:"activatedOn,omitempty"`
	LastModified                        string             `json:"lastModified"`
	PublicEndpoint                      string             `json:"publicEndpoint"`
	PrivateEndpoint                     string             `json:"privateEndpoint"`
	Clustering                          clusteringView     `json:"clustering"`
	Security                            securityView       `json:"security"`
	Modules                             []clouddb.Module   `json:"modules"`
	Alerts                              []clouddb.Alert    `json:"alerts"`
	Backup                              backupView         `json:"backup"`
	PeriodicBackupPath                  string             `json:"periodicBackupPath,omitempty"`
	AutoMinorVersionUpgrade             bool               `json:"autoMinorVersionUpgrade"`
	RAMPercentage                       int                `json:"ramPercentage,omitempty"`
	AverageItemSizeInBytes              int                `json:"averageItemSizeInBytes,omitempty"`
	QueryPerformanceFactor              string             `json:"queryPerformanceFactor,omitempty"`
	Links                               []any              `json:"links"`
	ReplicaOf                           *replicaOfView     `json:"replicaOf,omitempty"`
}

type clusteringView struct {
	NumberOfShards int             `json:"numberOfShards"`
	RegexRules     []regexRuleView `json:"regexRules"`
	HashingPolicy  string          `json:"hashingPolicy"`
}

type regexRuleView struct {
	Ordinal int    `json:"ordinal"`
	Pattern string `json:"pattern"`
}

type securityView struct {
	EnableDefaultUser       bool     `json:"enableDefaultUser"`
	SSLClientAuthentication bool     `json:"sslClientAuthentication"`
	TLSClientAuthentication bool     `json:"tlsClientAuthentication"`
	EnableTLS               bool     `json:"enableTls"`
	SourceIPs               []string `json:"sourceIps"`
	Password                string   `json:"password"`
}

type backupView struct {
	EnableRemoteBackup bool   `json:"enableRemoteBackup"`
	Interval           string `json:"interval"`
	TimeUTC            string `json:"timeUTC"`
	Destination        string `json:"destination,omitempty"`
}

type replicaOfView struct {
	Endpoints []string `json:"endpoints"`
}

// regexRulesView lists rules by ordinal, the standard policy's when there are none
// (Terraform maps exactly that pair to an empty hashing_policy).
func regexRulesView(rules []string) []regexRuleView {
	if len(rules) == 0 {
		rules = clouddb.DefaultRegexRules
	}
	out := make([]regexRuleView, len(rules))
	for i, p := range rules {
		out[i] = regexRuleView{Ordinal: i, Pattern: p}
	}
	return out
}

func (s *Server) newDatabaseView(sub *clouddb.Subscription, d *clouddb.Database) databaseView {
	spec := &d.Spec
	endpoint := net.JoinHostPort(s.AdvertiseHost, strconv.Itoa(d.Port))
	if s.PublicEndpoint != nil {
		endpoint = s.PublicEndpoint(d.ID, d.Port)
	}
	private := endpoint
	if s.PrivateEndpoint != nil {
		private = s.PrivateEndpoint(d.ID, d.Port)
	}
	// Exactly the major.minor stored (Terraform compares it with its configuration);
	// one stored before versions were has the default.
	version := s.versions().Resolve(spec.RedisVersion)
	memoryLimitGB, datasetSizeGB := spec.ShownSizes()
	v := databaseView{
		DatabaseID:                          d.ID,
		Name:                                spec.Name,
		Protocol:                            "redis",
		RedisVersion:                        version,
		RedisVersionCompliance:              s.versions().Compliance(version),
		RespVersion:                         orDefault(spec.RespVersion, "resp2"),
		Status:                              string(d.Status),
		StatusDetail:                        d.StatusDetail,
		MemoryLimitInGB:                     memoryLimitGB,
		DatasetSizeInGB:                     datasetSizeGB,
		MemoryStorage:                       sub.MemoryStorage,
		SupportOSSClusterAPI:                spec.SupportOSSClusterAPI,
		UseExternalEndpointForOSSClusterAPI: spec.UseExternalEndpointForOSSClusterAPI,
		DataPersistence:                     orDefault(spec.DataPersistence, clouddb.DefaultDataPersistence),
		Replication:                         spec.Replication,
		DataEvictionPolicy:                  orDefault(spec.DataEvictionPolicy, clouddb.DefaultEvictionPolicy),
		ThroughputMeasurement:               clouddb.DefaultThroughput(),
		LastModified:                        timestamp(d.UpdatedAt),
		PublicEndpoint:                      endpoint,
		PrivateEndpoint:                     private,
		Clustering:                          clusteringView{NumberOfShards: spec.NumberOfShards(), RegexRules: regexRulesView(spec.RegexRules), HashingPolicy: "standard"},
		Security: securityView{
			EnableDefaultUser: spec.EnableDefaultUser == nil || *spec.EnableDefaultUser,
			SourceIPs:         spec.SourceIPs,
			Password:          d.Password,
		},
		Modules:                 nonNil(spec.Modules),
		Alerts:                  nonNil(spec.Alerts),
		PeriodicBackupPath:      spec.PeriodicBackupPath,
		AutoMinorVersionUpgrade: spec.AutoMinorVersionUpgrade,
		RAMPercentage:           spec.RAMPercentage,
		AverageItemSizeInBytes:  spec.AverageItemSizeInBytes,
		QueryPerformanceFactor:  spec.QueryPerformanceFactor,
		Links:                   []any{},
	}
	tlsSecurity(&v.Security, spec)
	if len(sub.CloudProviders) > 0 {
		v.Provider = sub.CloudProviders[0].Provider
		if len(sub.CloudProviders[0].Regions) > 0 {
			v.Region = sub.CloudProviders[0].Regions[0].Region
		}
	}
	if t := spec.ThroughputMeasurement; t != nil {
		v.ThroughputMeasurement = *t
	}
	if len(v.Security.SourceIPs) == 0 {
		// Made before sourceIp was stored, or cleared with []: the default of its
		// subscription.
		v.Security.SourceIPs = clouddb.DefaultSourceIPs(sub.PublicEndpointAccess)
	}
	if !d.ActivatedOn.IsZero() {
		v.ActivatedOn = timestamp(d.ActivatedOn)
	}
	switch b := spec.RemoteBackup; {
	case b != nil && b.Active:
		v.Backup = backupView{EnableRemoteBackup: true, Interval: orDefault(b.Interval, clouddb.DefaultBackupInterval), TimeUTC: b.TimeUTC, Destination: orDefault(b.StoragePath, spec.PeriodicBackupPath)}
	case spec.PeriodicBackupPath != "":
		// periodicBackupPath alone turns on daily backups to that path.
		v.Backup = backupView{EnableRemoteBackup: true, Interval: clouddb.DefaultBackupInterval, Destination: spec.PeriodicBackupPath}
	}
	if len(d.ReplicaOf) > 0 {
		v.ReplicaOf = &replicaOfView{Endpoints: d.ReplicaOf}
	}
	return v
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// withDatabase loads the caller's subscription and database named by the path. A
// database being deleted is already gone.
func (s *Server) withDatabase(r *http.Request, c *caller) (*clouddb.Subscription, *clouddb.Database, error) {
	subID, err := pathID(r, "subscriptionId")
	if err != nil {
		return nil, nil, err
	}
	dbID, err := pathID(r, "databaseId")
	if err != nil {
		return nil, nil, err
	}
	var (
		sub *clouddb.Subscription
		d   *clouddb.Database
	)
	err = s.Store.View(r.Context(), func(tx clouddb.Tx) error {
		var txErr error
		if sub, txErr = findSubscription(r.Context(), tx, c, subID); txErr != nil {
			return txErr
		}
		d, txErr = findDatabase(r.Context(), tx, c, subID, dbID)
		return txErr
	})
	return sub, d, err
}

func findDatabase(ctx context.Context, tx clouddb.Tx, c *caller, subID, id int) (*clouddb.Database, error) {
	d, err := tx.Database(ctx, c.account.ID, id)
	if errors.Is(err, clouddb.ErrNotFound) || (err == nil && (d.SubscriptionID != subID || d.Status == clouddb.DatabaseDeleting)) {
		return nil, clouddb.NotFound(clouddb.ErrTypeDatabaseNotFound, "database %d not found in subscription %d", id, subID)
	}
	return d, err
}

type databaseListEntry struct {
	SubscriptionID    int            `json:"subscriptionId"`
	NumberOfDatabases int            `json:"numberOfDatabases"`
	Databases         []databaseView `json:"databases"`
}

// listDatabases pages with limit/offset; a page past the end is empty but still holds the
// one subscription entry the Go client requires.
func (s *Server) listDatabases(r *http.Request, c *caller) (int, any, error) {
	subID, err := pathID(r, "subscriptionId")
	if err != nil {
		return 0, nil, err
	}
	offset, err := queryInt(r, "offset", 0, 0, 1<<30)
	if err != nil {
		return 0, nil, err
	}
	limit, err := queryInt(r, "limit", 100, 1, 100)
	if err != nil {
		return 0, nil, err
	}
	var (
		sub   *clouddb.Subscription
		dbs   []*clouddb.Database
		total int
	)
	err = s.Store.View(r.Context(), func(tx clouddb.Tx) error {
		var txErr error
		if sub, txErr = findSubscription(r.Context(), tx, c, subID); txErr != nil {
			return txErr
		}
		dbs, total, txErr = tx.Databases(r.Context(), clouddb.DatabaseFilter{AccountID: c.account.ID, SubscriptionID: subID,
			ExcludeDeleting: true, Offset: offset, Limit: limit})
		return txErr
	})
	if err != nil {
		return 0, nil, err
	}
	entry := databaseListEntry{SubscriptionID: sub.ID, NumberOfDatabases: total, Databases: make([]databaseView, 0, len(dbs))}
	for _, d := range dbs {
		entry.Databases = append(entry.Databases, s.newDatabaseView(sub, d))
	}
	return http.StatusOK, map[string]any{"accountId": c.account.ID, "subscription": []databaseListEntry{entry}, "links": []any{}}, nil
}

func (s *Server) getDatabase(r *http.Request, c *caller) (int, any, error) {
	sub, d, err := s.withDatabase(r, c)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, s.newDatabaseView(sub, d), nil
}

func (s *Server) createDatabase(r *http.Request, c *caller) (int, any, error) {
	sub, _, err := s.withSubscription(r, c)
	if err != nil {
		return 0, nil, err
	}
	var body createDatabaseRequest
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	spec := body.DatabaseSpec
	if body.ReplicaOf != nil {
		spec.ReplicaOf = *body.ReplicaOf
	}
	spec.ClientTLSCertificates = body.ClientTLSCertificates
	spec.Quantity = 0
	return s.enqueue(r, c, http.StatusAccepted, &clouddb.Task{CommandType: clouddb.CommandDatabaseCreate, SubscriptionID: sub.ID}, spec)
}

func (s *Server) updateDatabase(r *http.Request, c *caller) (int, any, error) {
	sub, d, err := s.withDatabase(r, c)
	if err != nil {
		return 0, nil, err
	}
	var body updateDatabaseRequest
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	u := body.DatabaseUpdate
	u.ReplicaOf = body.ReplicaOf
	u.ClientTLSCertificates = body.ClientTLSCertificates.update()
	return s.enqueue(r, c, http.StatusOK, &clouddb.Task{CommandType: clouddb.CommandDatabaseUpdate, SubscriptionID: sub.ID, DatabaseID: d.ID}, u)
}

func (s *Server) deleteDatabase(r *http.Request, c *caller) (int, any, error) {
	sub, d, err := s.withDatabase(r, c)
	if err != nil {
		return 0, nil, err
	}
	return s.enqueue(r, c, http.StatusOK, &clouddb.Task{CommandType: clouddb.CommandDatabaseDelete, SubscriptionID: sub.ID, DatabaseID: d.ID}, nil)
}

type tagsBody struct {
	Tags []clouddb.Tag `json:"tags"`
}

func (s *Server) getDatabaseTags(r *http.Request, c *caller) (int, any, error) {
	_, d, err := s.withDatabase(r, c)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, tagsBody{Tags: nonNil(d.Spec.Tags)}, nil
}

// putDatabaseTags replaces the tags at once: they are metadata and change no server.
func (s *Server) putDatabaseTags(r *http.Request, c *caller) (int, any, error) {
	subID, err := pathID(r, "subscriptionId")
	if err != nil {
		return 0, nil, err
	}
	dbID, err := pathID(r, "databaseId")
	if err != nil {
		return 0, nil, err
	}
	var body struct {
		Tags *[]clouddb.Tag `json:"tags"`
	}
	if err = decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	if body.Tags == nil {
		return 0, nil, clouddb.Invalid(clouddb.ErrTypeInvalidField, "field tags is required (an empty array clears them)")
	}
	if err = clouddb.ValidateTags("database", "tags", *body.Tags); err != nil {
		return 0, nil, err
	}
	var d *clouddb.Database
	err = s.Store.Update(r.Context(), func(tx clouddb.Tx) error {
		var txErr error
		if _, txErr = findSubscription(r.Context(), tx, c, subID); txErr != nil {
			return txErr
		}
		if d, txErr = findDatabase(r.Context(), tx, c, subID, dbID); txErr != nil {
			return txErr
		}
		d.Spec.Tags = *body.Tags
		if txErr = tx.UpdateDatabase(r.Context(), d); txErr != nil {
			return txErr
		}
		// Like every change made through the API, it is in the account's system log.
		return tx.CreateLogEntry(r.Context(), &clouddb.LogEntry{
			AccountID: c.account.ID, Time: s.Now(), Originator: "API", APIKeyName: c.key.Name,
			Resource: d.Spec.Name, ResourceID: d.ID, Type: clouddb.LogTypeDatabase,
			Description: fmt.Sprintf("Tags of database %q (id %d) set (%d tags)", d.Spec.Name, d.ID, len(d.Spec.Tags)),
		})
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, tagsBody{Tags: nonNil(d.Spec.Tags)}, nil
}
