// Package aclcheck is the logic of clouddb.ACLChecker that every driver shares: which
// servers a batch of rules is checked on (one per distinct server of the Redis versions
// offered, oldest version first), the memory of verdicts, the definition of the rules on
// a server exactly as named users get them, and the refusal the API reports. A driver
// brings only the throwaway server (a local binary, a pod).
package aclcheck

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"clouddb"
	"clouddb/internal/redisconf"
)

// MaxVerdicts bounds a Cache made by drivers (see NewCache).
const MaxVerdicts = 4096

// User is the user Define defines each rule on, off and without a password.
const User = "clouddb-check"

// Verdict is what a server answered to a rule: accepted, or refused with the word it
// names (if any) and its reason.
type Verdict struct {
	Refused      bool
	Word, Reason string
}

// Checker checks rules on the server of each Redis version a driver offers.
type Checker struct {
	// Versions are the servers (a binary, an image) by Redis version; several versions
	// may share one server, which is asked once.
	Versions map[string]string
	// Key identifies a server's verdicts in Verdicts; false when the server cannot be
	// identified, whose verdicts are then not kept.
	Key func(server string) (string, bool)
	// Verdicts remember what servers answered.
	Verdicts *Cache
	// Run defines rules on a throwaway server (with Define) and returns a verdict for
	// each; an error means the check could not be made.
	Run func(ctx context.Context, server string, rules []string) (map[string]Verdict, error)
}

// Check verifies rules on the server of each version offered, oldest version first: a
// database may run any of them, or be upgraded to it. The first rule refused (in the
// order given) gives a *clouddb.Error (clouddb.ACLRuleRefused) that names it by its text
// and the word refused, and the version when several are offered; any other error means
// the check itself could not be made.
func (c *Checker) Check(ctx context.Context, rules []string) error {
	for _, s := range Servers(c.Versions) {
		if err := c.CheckOn(ctx, s, rules); err != nil {
			return err
		}
	}
	return nil
}

// CheckOn verifies rules on the server s only, as Check does on each: the rules it has no
// verdict for are asked in one Run (before an upgrade, this tells whether the target
// version takes the users a database has).
func (c *Checker) CheckOn(ctx context.Context, s string, rules []string) error {
	var order []string // each rule once, in the order given
	for _, r := range rules {
		if !slices.Contains(order, r) {
			order = append(order, r)
		}
	}
	for _, r := range order {
		if clouddb.ValidateACLRule(r) != nil {
			return clouddb.ACLRuleSyntaxRefused(r) // no server is asked about such a rule
		}
	}
	key, cacheable := c.Key(s)
	found := make(map[string]Verdict, len(order))
	var todo []string
	for _, r := range order {
		if cacheable {
			if v, ok := c.Verdicts.Get(key + r); ok {
				found[r] = v
				continue
			}
		}
		todo = append(todo, r)
	}
	if len(todo) > 0 {
		fresh, err := c.Run(ctx, s, todo)
		if err != nil {
			return err
		}
		for _, r := range todo {
			v, ok := fresh[r]
			if !ok {
				return fmt.Errorf("check ACL rules: no verdict on %q", r)
			}
			found[r] = v
			// A refusal in a form not understood may be no verdict on the rule: asked
			// again next time.
			if cacheable && (!v.Refused || v.Word != "") {
				c.Verdicts.Put(key+r, v)
			}
		}
	}
	for _, r := range order {
		if v := found[r]; v.Refused {
			return Refusal(c.Versions, s, r, v)
		}
	}
	return nil
}

// Servers are the distinct servers of versions, each in the place of its oldest version,
// oldest first.
func Servers(versions map[string]string) []string {
	vs := make([]string, 0, len(versions))
	for v := range versions {
		vs = append(vs, v)
	}
	slices.SortFunc(vs, clouddb.CompareRedisVersions)
	var out []string
	for _, v := range vs {
		if s := versions[v]; !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// Refusal is the API's error of a rule that server s refused: the version is named when
// several are offered, so that a rule valid on one is understood.
func Refusal(versions map[string]string, s, rule string, v Verdict) error {
	who := "Redis"
	if len(versions) > 1 {
		var of []string
		for version, server := range versions {
			if server == s {
				of = append(of, version)
			}
		}
		if len(of) > 0 {
			who += " " + slices.MinFunc(of, clouddb.CompareRedisVersions)
		}
	}
	if v.Word == "" {
		return clouddb.ACLRuleRefused(rule, fmt.Sprintf("%s refuses it: %s", who, v.Reason))
	}
	return clouddb.ACLRuleRefused(rule, fmt.Sprintf("%s refuses %q: %s", who, v.Word, v.Reason))
}

// refusedWord reads the word out of redis' "Error in ACL SETUSER modifier '<word>':
// <reason>".
var refusedWord = regexp.MustCompile(`modifier '(.*)': (.*)$`)

// Define defines User on the server behind c with each rule's words in turn, composed as
// a named user gets them (redisconf.RuleWords: clouddb's denials included), and deletes
// it after each, all in one round trip. It returns a verdict for each rule; an error
// means the check could not be made.
func Define(ctx context.Context, c *redis.Client, rules []string) (map[string]Verdict, error) {
	p := c.Pipeline()
	set := make([]*redis.Cmd, len(rules))
	for i, rule := range rules {
		args := []any{"acl", "setuser", User, "reset", "off"}
		for _, w := range redisconf.RuleWords(rule) {
			args = append(args, w)
		}
		set[i] = p.Do(ctx, args...)
		p.Do(ctx, "acl", "deluser", User)
	}
	_, _ = p.Exec(ctx) // each SETUSER's answer is read below
	verdict := make(map[string]Verdict, len(rules))
	for i, rule := range rules {
		err := set[i].Err()
		if err == nil {
			verdict[rule] = Verdict{}
			continue
		}
		var rerr redis.Error
		if !errors.As(err, &rerr) {
			return nil, err
		}
		msg, _, _ := strings.Cut(err.Error(), "\n")
		msg = strings.TrimPrefix(msg, "ERR ")
		if m := refusedWord.FindStringSubmatch(msg); m != nil {
			verdict[rule] = Verdict{Refused: true, Word: m[1], Reason: m[2]}
		} else {
			verdict[rule] = Verdict{Refused: true, Reason: msg}
		}
	}
	return verdict, nil
}

// Cache is a bounded memory of verdicts, least recently used first out.
type Cache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *cached, the most recently used first
	byKey map[string]*list.Element
}

type cached struct {
	key string
	v   Verdict
}

// NewCache is a Cache of at most max verdicts.
func NewCache(max int) *Cache {
	return &Cache{max: max, order: list.New(), byKey: map[string]*list.Element{}}
}

// Get is the verdict remembered for key.
func (c *Cache) Get(key string) (Verdict, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return Verdict{}, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cached).v, true
}

// Put remembers v for key, forgetting the least recently used beyond the bound.
func (c *Cache) Put(key string, v Verdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		e.Value.(*cached).v = v
		c.order.MoveToFront(e)
		return
	}
	c.byKey[key] = c.order.PushFront(&cached{key, v})
	for c.order.Len() > c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.byKey, oldest.Value.(*cached).key)
	}
}

// Len is the number of verdicts remembered.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
