package clouddb

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ACLStatus is the provisioning state of an ACL rule, role or user.
type ACLStatus string

// ACL states: pending while a change is applied to the databases it reaches, active once
// every one of them has it, deleting until a deleted user is gone from them all. error is
// part of the API's vocabulary; clouddb sets it on a resource whose step panicked.
const (
	ACLPending  ACLStatus = "pending"
	ACLActive   ACLStatus = "active"
	ACLDeleting ACLStatus = "deleting"
	ACLError    ACLStatus = "error"
)

// ACLRule is a named Redis ACL rule ("+@read ~*"): the commands, keys and channels a user
// may use on the databases a role binds it to.
type ACLRule struct {
	ID int
	// AccountID is 0 for the default rules, which every account has.
	AccountID int
	Name      string
	// ACL is the rule text, kept byte for byte as sent (the API sends it as redisRule and
	// reads it back as acl).
	ACL        string
	IsDefault  bool
	Status     ACLStatus
	Generation int
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// DefaultACLRules are the rules every account has; they cannot be changed or deleted.
// Their text is the API's, the double space of Full-Access included.
var DefaultACLRules = []ACLRule{
	{ID: 1, Name: "Full-Access", ACL: "+@all  ~*", IsDefault: true, Status: ACLActive, Generation: 1},
	{ID: 2, Name: "Read-Write", ACL: "+@all -@dangerous ~*", IsDefault: true, Status: ACLActive, Generation: 1},
	{ID: 3, Name: "Read-Only", ACL: "+@read ~*", IsDefault: true, Status: ACLActive, Generation: 1},
}

// ACLRole binds rules to databases: a user holding the role is a user of each database its
// rules name, limited by that rule.
type ACLRole struct {
	ID         int
	AccountID  int
	Name       string
	Rules      []ACLRoleRule
	Status     ACLStatus
	Generation int
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// ACLRoleRule is one rule of a role and the databases it applies to. The rule is kept by
// id, so that a renamed rule reads back under its new name.
type ACLRoleRule struct {
	RuleID    int                  `json:"ruleId"`
	Databases []ACLRoleDatabaseRef `json:"databases"`
}

// ACLRoleDatabaseRef names a database a role's rule applies to.
type ACLRoleDatabaseRef struct {
	SubscriptionID int      `json:"subscriptionId"`
	DatabaseID     int      `json:"databaseId"`
	Regions        []string `json:"regions,omitempty"`
}

// ACLUser is a named user of the databases its role reaches.
type ACLUser struct {
	ID        int
	AccountID int
	Name      string
	// RoleID is the role the user holds; the API names it by the role's current name.
	RoleID int
	// Password is sealed at rest and never returned by the API.
	Password   string
	Status     ACLStatus
	Generation int
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Limits of ACL fields.
const (
	MinACLPasswordLength = 8
	MaxACLPasswordLength = 128
	MaxACLRuleLength     = 1024
	// MaxACLNameLength bounds rule, role and user names (the provider's acceptance tests
	// make user names of more than 40 characters).
	MaxACLNameLength = 64
)

// Log entry types of ACL changes.
const (
	LogTypeACLRule = "ACLRedisRule"
	LogTypeACLRole = "ACLRole"
	LogTypeACLUser = "ACLUser"
)

// ACL error types (the API's catalogue).
const (
	ErrTypeACLRulePatternInvalid       = "ACL_REDIS_RULE_PATTERN_NOT_VALID"
	ErrTypeACLRuleNotFound             = "ACL_REDIS_RULE_NOT_FOUND"
	ErrTypeACLRuleNameTaken            = "ACL_REDIS_RULE_NAME_ALREADY_EXISTS"
	ErrTypeACLRuleDefaultUpdate        = "ACL_REDIS_RULE_CANNOT_UPDATE_DEFAULT"
	ErrTypeACLRuleDefaultDelete        = "ACL_REDIS_RULE_CANNOT_DELETE_DEFAULT"
	ErrTypeACLRuleInUse                = "ACL_REDIS_RULE_CANNOT_DELETE_WHEN_ASSOCIATED_WITH_ROLES"
	ErrTypeACLRoleNotFound             = "ACL_ROLE_NOT_FOUND"
	ErrTypeACLRoleNameTaken            = "ACL_ROLE_NAME_ALREADY_EXISTS"
	ErrTypeACLRoleHasUsers             = "ACL_ROLE_HAS_ACTIVE_USERS_AND_CANNOT_BE_DELETED"
	ErrTypeACLRoleRuleTwicePerDatabase = "ACL_ROLE_REDIS_RULE_MUST_BE_DEFINED_ONLY_ONCE_PER_DATABASE"
	ErrTypeACLRoleRegionsNotCRDB       = "ACL_ROLE_REDIS_RULES_DATABASES_REGION_MUST_BE_CRDB"
	ErrTypeACLRoleDoesNotExist         = "ACL_ROLE_DOES_NOT_EXISTS"
	ErrTypeACLUserNotFound             = "ACL_USER_NOT_FOUND"
	ErrTypeACLUserNameTaken            = "ACL_USER_NAME_ALREADY_EXISTS"
	ErrTypeACLUserNameInvalid          = "ACL_USER_NAME_NOT_VALID"
	ErrTypeACLUserPasswordInvalid      = "ACL_USER_PASSWORD_NOT_VALID"
	aclRulePatternReason               = "commands must start with a + or - sign, categories must start with +@ or -@ characters and keys must start with the ~ symbol"
	aclRulePatternMessage              = "Invalid ACL redis rule: " + aclRulePatternReason
	aclRulePatternAdditionalInfo       = "redis-acl-wrong-acl-rule-pattern"
	aclUserPasswordAdditionalInfo      = "cluster-user-password-wrong-pattern"
	aclUserPasswordMessage             = "ACL user password is not valid."
	ACLRoleDoesNotExistMessage         = "ACL role associated with a user has to exist."
	// aclRuleKeywords are the words of a rule that take no +, -, ~, % or & prefix.
	aclRuleKeywords = "allkeys resetkeys allchannels resetchannels allcommands nocommands"
)

// ValidateACLRule checks a rule's syntax, word by word: +command, -command, +@category,
// -@category, ~keypattern, %R~ / %W~ / %RW~keypattern, &channel, and the keywords allkeys,
// resetkeys, allchannels, resetchannels, allcommands, nocommands. Anything else is
// refused, notably what would define the user rather than limit it (on, off, >password,
// nopass, reset) and selectors "(...)": clouddb appends its own denials of server
// administration to the rule, and a selector is a second, separate permission set that
// those denials would not reach.
func ValidateACLRule(rule string) error {
	if strings.TrimSpace(rule) == "" || utf8.RuneCountInString(rule) > MaxACLRuleLength {
		return aclRuleInvalid()
	}
	keywords := strings.Fields(aclRuleKeywords)
	for _, w := range strings.Fields(rule) {
		if !validACLWord(w, keywords) {
			return aclRuleInvalid()
		}
	}
	return nil
}

func validACLWord(w string, keywords []string) bool {
	for _, r := range w {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) {
			return false
		}
	}
	for _, k := range keywords {
		if strings.EqualFold(w, k) {
			return true
		}
	}
	switch {
	case strings.HasPrefix(w, "+@"), strings.HasPrefix(w, "-@"):
		return len(w) > 2 && !strings.ContainsAny(w[2:], "@|()")
	case strings.HasPrefix(w, "+"), strings.HasPrefix(w, "-"):
		return len(w) > 1 && !strings.ContainsAny(w[1:], "@()") && !strings.HasPrefix(w[1:], "|") && !strings.HasSuffix(w, "|")
	case strings.HasPrefix(w, "~"), strings.HasPrefix(w, "&"):
		return len(w) > 1
	case strings.HasPrefix(w, "%"):
		perm, pattern, ok := strings.Cut(w[1:], "~")
		if !ok || pattern == "" {
			return false
		}
		switch strings.ToUpper(perm) {
		case "R", "W", "RW", "WR":
			return true
		}
	}
	return false
}

// aclRuleInvalid is the API's error for a rule that is not valid.
func aclRuleInvalid() *Error {
	e := Invalid(ErrTypeACLRulePatternInvalid, aclRulePatternMessage)
	e.AdditionalInfo = aclRulePatternAdditionalInfo
	return e
}

// aclRuleRefusedPrefix begins the description of an ACLRuleRefused error; the rule's
// name or text follows, quoted.
const aclRuleRefusedPrefix = "Invalid ACL redis rule "

// ACLRuleRefused is the error of a rule refused for reason (what a real server said of
// it, e.g. `Redis refuses "+foo": Unknown command or category name in ACL`): the syntax
// error's type and additional info, the rule named once and the reason. rule is the
// rule's name in the API's errors, its text in the driver's, which knows no names (see
// ACLRuleRefusal).
func ACLRuleRefused(rule, reason string) *Error {
	e := aclRuleInvalid()
	e.Description = fmt.Sprintf("%s%q: %s", aclRuleRefusedPrefix, rule, reason)
	return e
}

// ACLRuleSyntaxRefused is ACLRuleRefused for a rule that ValidateACLRule refuses.
func ACLRuleSyntaxRefused(rule string) *Error {
	return ACLRuleRefused(rule, aclRulePatternReason)
}

// ACLRuleRefusal reads an ACLRuleRefused error back: the rule it names and the reason,
// so that whoever knows the rule by another name (a task, by its name) can say the same
// with it, without repeating the prefix.
func ACLRuleRefusal(err error) (rule, reason string, ok bool) {
	e := AsError(err)
	if e == nil || e.Type != ErrTypeACLRulePatternInvalid {
		return "", "", false
	}
	rest, found := strings.CutPrefix(e.Description, aclRuleRefusedPrefix)
	if !found {
		return "", "", false
	}
	quoted, qerr := strconv.QuotedPrefix(rest)
	if qerr != nil {
		return "", "", false
	}
	if reason, found = strings.CutPrefix(rest[len(quoted):], ": "); !found {
		return "", "", false
	}
	rule, qerr = strconv.Unquote(quoted)
	return rule, reason, qerr == nil
}

// ValidateACLName checks the name of a rule or a role (what names it, e.g. "ACL role"):
// 1 to MaxACLNameLength characters, none of them a control or format character.
func ValidateACLName(what, name string) error {
	if name == "" {
		return Invalid(ErrTypeInvalidField, "%s: name is required", what)
	}
	return checkText(what, "name", name, MaxACLNameLength)
}

// ValidateACLUserName checks a user name: 1 to MaxACLNameLength printable characters without
// spaces, and not one of the users every database has or clouddb keeps for itself.
func ValidateACLUserName(name string) error {
	if name == "" || utf8.RuneCountInString(name) > MaxACLNameLength {
		return Invalid(ErrTypeACLUserNameInvalid, "ACL user: name must be 1 to %d characters", MaxACLNameLength)
	}
	for _, r := range name {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return Invalid(ErrTypeACLUserNameInvalid, "ACL user: name may only contain printable ASCII characters without spaces")
		}
	}
	if strings.EqualFold(name, "default") || strings.HasPrefix(strings.ToLower(name), "clouddb-") {
		return Invalid(ErrTypeACLUserNameInvalid, "ACL user: name %q is reserved (default and clouddb-* name the database's own users)", name)
	}
	return nil
}

// ValidateACLPassword checks an ACL user's password: 8 to 128 characters with a lower-case
// letter, an upper-case letter, a digit and a special character, no spaces.
func ValidateACLPassword(p string) error {
	n := utf8.RuneCountInString(p)
	var lower, upper, digit, special bool
	ok := n >= MinACLPasswordLength && n <= MaxACLPasswordLength
	for _, r := range p {
		switch {
		case unicode.IsSpace(r) || !unicode.IsPrint(r):
			ok = false
		case unicode.IsLower(r):
			lower = true
		case unicode.IsUpper(r):
			upper = true
		case unicode.IsDigit(r):
			digit = true
		default:
			special = true
		}
	}
	if ok && lower && upper && digit && special {
		return nil
	}
	e := Invalid(ErrTypeACLUserPasswordInvalid, "%s It must be %d to %d characters without spaces, with a lower-case letter, an upper-case letter, a digit and a special character.",
		aclUserPasswordMessage, MinACLPasswordLength, MaxACLPasswordLength)
	e.AdditionalInfo = aclUserPasswordAdditionalInfo
	return e
}
