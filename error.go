package clouddb

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Error is a domain error carrying what both the synchronous HTTP answer and a failed
// task's response.error need: an HTTP status, an upper-snake type code and a description.
// Errors that are not *Error are internal and must never reach a client verbatim.
type Error struct {
	// Status is the HTTP status the error maps to (400, 403, 404, 409, ...).
	Status int
	// Type is the machine code, e.g. SUBSCRIPTION_NOT_FOUND.
	Type string
	// Description is the human text; it names the field and the rule where there is one.
	Description string
	// AdditionalInfo is a second machine code some errors carry (an ACL rule or password
	// that is not valid); a failed task shows it beside its error.
	AdditionalInfo string
}

func (e *Error) Error() string { return e.Type + ": " + e.Description }

// StatusText renders the status the way task errors carry it: "404 NOT_FOUND".
func (e *Error) StatusText() string { return StatusText(e.Status) }

// StatusText renders an HTTP status as "<code> <REASON>", e.g. "403 FORBIDDEN".
func StatusText(status int) string {
	reason := strings.ToUpper(strings.ReplaceAll(http.StatusText(status), " ", "_"))
	reason = strings.ReplaceAll(reason, "-", "_")
	return strconv.Itoa(status) + " " + reason
}

// Errorf returns an *Error with the given status, type and formatted description.
func Errorf(status int, typ, format string, args ...any) *Error {
	return &Error{Status: status, Type: typ, Description: fmt.Sprintf(format, args...)}
}

// Invalid is a 400 error of the given type.
func Invalid(typ, format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, typ, format, args...)
}

// NotFound is a 404 error of the given type.
func NotFound(typ, format string, args ...any) *Error {
	return Errorf(http.StatusNotFound, typ, format, args...)
}

// Forbidden is a 403 error of the given type.
func Forbidden(typ, format string, args ...any) *Error {
	return Errorf(http.StatusForbidden, typ, format, args...)
}

// Conflict is a 409 error of the given type.
func Conflict(typ, format string, args ...any) *Error {
	return Errorf(http.StatusConflict, typ, format, args...)
}

// AsError returns the *Error inside err, or nil when err is internal.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// ErrNotFound is what a store returns for a missing row; callers that answer clients turn
// it into the resource-specific 404 (SUBSCRIPTION_NOT_FOUND, ...).
var ErrNotFound = errors.New("not found")

// ErrConflict is what a store returns when a unique constraint is violated.
var ErrConflict = errors.New("conflict")

// ErrStorageFull is what a store returns when its disk is full: the change was not made.
var ErrStorageFull = Errorf(http.StatusInsufficientStorage, "INSUFFICIENT_STORAGE",
	"clouddb's disk is full, so the change was not made: free space on the data directory's disk and try again")

// ErrUnavailable is what a store returns when it cannot reach its database (a shared
// store's server is down or unreachable): nothing was done, and the same request may
// succeed shortly.
var ErrUnavailable = Errorf(http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE",
	"clouddb cannot reach its state store just now, so nothing was done: try again shortly")

// ErrStorageUnwritable is what a store returns when it cannot write for another reason
// than a full disk (an I/O error, a read-only file or disk, a file it cannot open): the
// change was not made, and it can be once the operator has fixed the data directory.
var ErrStorageUnwritable = Errorf(http.StatusServiceUnavailable, "STORAGE_UNAVAILABLE",
	"clouddb cannot write its state store (an I/O error or a read-only disk), so the change was not made: try again later")

// Error types used across packages.
const (
	ErrTypeGeneral               = "GENERAL_ERROR"
	ErrTypeBadRequest            = "BAD_REQUEST"
	ErrTypeUnauthorized          = "UNAUTHORIZED"
	ErrTypeForbidden             = "FORBIDDEN"
	ErrTypeNotFound              = "NOT_FOUND"
	ErrTypeMethodNotAllowed      = "METHOD_NOT_ALLOWED"
	ErrTypeNotImplemented        = "NOT_IMPLEMENTED"
	ErrTypeUnsupportedPlan       = "PLAN_NOT_SUPPORTED"
	ErrTypeInvalidField          = "INVALID_FIELD"
	ErrTypeMalformedBody         = "MALFORMED_BODY"
	ErrTypeSubscriptionNotFound  = "SUBSCRIPTION_NOT_FOUND"
	ErrTypeSubscriptionNotActive = "SUBSCRIPTION_NOT_ACTIVE"
	ErrTypeSubscriptionLimit     = "SUBSCRIPTION_MAX_PENDING_REACHED"
	ErrTypeSubscriptionNotEmpty  = "SUBSCRIPTION_HAS_DATABASES"
	ErrTypePaymentNotFound       = "SUBSCRIPTION_PI_NOT_FOUND"
	ErrTypeCloudAccountNotFound  = "CLOUD_ACCOUNT_NOT_FOUND"
	ErrTypeCloudAccountInUse     = "CLOUD_ACCOUNT_IN_USE"
	ErrTypeCloudAccountInternal  = "CLOUD_ACCOUNT_READ_ONLY"
	ErrTypeDatabaseNotFound      = "DATABASE_NOT_FOUND"
	ErrTypeDatabaseNameTaken     = "DATABASE_NAME_ALREADY_EXISTS"
	ErrTypeDatabaseInvalidName   = "DATABASE_INVALID_NAME"
	ErrTypeDatabaseNoPassword    = "DATABASE_PASSWORD_REQUIRED"
	ErrTypeDatabaseInvalidSize   = "DATABASE_INVALID_SIZE"
	ErrTypeDatabaseBackup        = "DATABASE_BACKUP_DISABLED"
	ErrTypeInvalidCIDR           = "INVALID_DEPLOYMENT_CIDR"
	ErrTypeNoDatabases           = "SUBSCRIPTION_DATABASES_REQUIRED"
	ErrTypeNoPorts               = "NO_FREE_PORT"
	ErrTypeNoMemory              = "INSUFFICIENT_MEMORY"
	ErrTypeTaskNotFound          = "TASK_NOT_FOUND"
)
