package clouddb

import (
	"fmt"
	"net/url"
	"unicode"
	"unicode/utf8"
)

// Limits of what users write: every string or list a user gives is kept in the store and
// shown in every answer that lists its resource, so each is bounded. Lengths count
// characters (runes), not bytes.
const (
	// MaxNameLength bounds subscription and database names.
	MaxNameLength = 40
	// MaxCloudAccountNameLength bounds cloud account names.
	MaxCloudAccountNameLength = 100
	// MaxShortText bounds the other short strings: regions, availability zones, VPC ids,
	// console user names, queryPerformanceFactor, redisVersion.
	MaxShortText = 64
	// MaxTags bounds a tag list (a database's tags, a provider's resourceTags); a key has
	// 1 to MaxTagKeyLength characters, a value at most MaxTagValueLength.
	MaxTags           = 64
	MaxTagKeyLength   = 128
	MaxTagValueLength = 256
	// MaxRegexRules bounds a database's regexRules, each of at most MaxRegexRuleLength.
	MaxRegexRules      = 32
	MaxRegexRuleLength = 256
	// MaxURLLength bounds URLs and paths: signInLoginUrl, backup destinations, import
	// sources.
	MaxURLLength = 2048
	// MaxSecretLength bounds cloud account credentials.
	MaxSecretLength = 1024
	// MaxListLength bounds the other lists: alerts, certificates, cloud
	// providers, regions, zones, the databases of a creation plan.
	MaxListLength = 100
	// MaxCertificateLength bounds one PEM certificate.
	MaxCertificateLength = 16 << 10
)

// checkText checks a string a user gives that is stored and displayed: valid UTF-8, at
// most limit characters, and no control or format characters (NUL, newlines, bidi
// overrides, zero-width characters), which would let a name read as another one or break
// the lines it is shown in.
func checkText(resource, field, v string, limit int) error {
	if !utf8.ValidString(v) {
		return Invalid(ErrTypeInvalidField, "%s: %s must be valid UTF-8", resource, field)
	}
	if n := utf8.RuneCountInString(v); n > limit {
		return Invalid(ErrTypeInvalidField, "%s: %s must be at most %d characters, got %d", resource, field, limit, n)
	}
	for i, r := range []rune(v) {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return Invalid(ErrTypeInvalidField, "%s: %s must not contain control, bidi or invisible format characters (U+%04X at character %d)",
				resource, field, r, i+1)
		}
	}
	return nil
}

// checkLength checks only the length of a string that is not displayed as text (a
// secret, a certificate, a URL checked elsewhere).
func checkLength(resource, field, v string, limit int) error {
	if n := utf8.RuneCountInString(v); n > limit {
		return Invalid(ErrTypeInvalidField, "%s: %s must be at most %d characters, got %d", resource, field, limit, n)
	}
	return nil
}

// checkCount checks the length of a list.
func checkCount(resource, field string, n, limit int) error {
	if n > limit {
		return Invalid(ErrTypeInvalidField, "%s: %s may hold at most %d elements, got %d", resource, field, limit, n)
	}
	return nil
}

// ValidateTags checks a tag list: at most MaxTags tags, each key given once, 1 to
// MaxTagKeyLength characters, a value of at most MaxTagValueLength, neither with control
// or format characters.
func ValidateTags(resource, field string, tags []Tag) error {
	if err := checkCount(resource, field, len(tags), MaxTags); err != nil {
		return err
	}
	seen := make(map[string]bool, len(tags))
	for i, t := range tags {
		f := fmt.Sprintf("%s[%d]", field, i)
		if t.Key == "" {
			return Invalid(ErrTypeInvalidField, "%s: %s.key is required", resource, f)
		}
		if err := checkText(resource, f+".key", t.Key, MaxTagKeyLength); err != nil {
			return err
		}
		if err := checkText(resource, f+".value", t.Value, MaxTagValueLength); err != nil {
			return err
		}
		if seen[t.Key] {
			return Invalid(ErrTypeInvalidField, "%s: %s.key %q is given twice", resource, f, t.Key)
		}
		seen[t.Key] = true
	}
	return nil
}

// checkWebURL checks a URL a user may be sent to: http or https with a host, nothing
// else (javascript:, data:, file: would run or open something in a browser).
func checkWebURL(resource, field, v string) error {
	if err := checkText(resource, field, v, MaxURLLength); err != nil {
		return err
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Invalid(ErrTypeInvalidField, "%s: %s must be an http or https URL", resource, field)
	}
	return nil
}
