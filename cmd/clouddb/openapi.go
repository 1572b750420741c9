package main

import (
	"bytes"
	"crypto/sha256"
	_ "embed" // the docs page's template and stylesheet
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"clouddb/browser"
	"clouddb/cloudapi"
)

// The OpenAPI documents and their docs page, on the API listener:
//
//	GET /v1/openapi.json               the cloud API's document (no authentication)
//	GET /docs                          the cloud API's docs page
//	GET /docs/browser                  the browser local API's docs page
//	GET /docs/browser/openapi.json     the browser API's document (also GET /api/openapi.json
//	                                   on the browser listener)
//	GET /docs/docs.css                 the pages' stylesheet
//
// The pages are rendered on the server from the documents, with no script, under a
// Content-Security-Policy that allows nothing but this listener's stylesheet.

//go:embed openapi.html
var docsTemplateText string

// openAPIPath is the cloud API's document, served beside the API under /v1.
const openAPIPath = "/v1/openapi.json"

//go:embed openapi.css
var docsCSS []byte

// mountOpenAPI serves the OpenAPI documents and their docs pages. Its patterns are more
// specific than the cloud API's "/", so they win over it.
func (m *Main) mountOpenAPI(mux *http.ServeMux) {
	cloudDoc, browserDoc := cloudapi.OpenAPI(), browser.OpenAPI()
	mux.Handle("GET "+openAPIPath, staticFile("application/json", cloudDoc, false))
	mux.Handle("GET /docs/browser/openapi.json", staticFile("application/json", browserDoc, false))
	mux.Handle("GET /docs/docs.css", staticFile("text/css; charset=utf-8", docsCSS, true))
	mux.Handle("GET /docs", docsPage(cloudDoc, docsLinks{JSON: "/v1/openapi.json", Other: "/docs/browser", OtherName: "the browser local API"}))
	mux.Handle("GET /docs/browser", docsPage(browserDoc, docsLinks{JSON: "/docs/browser/openapi.json", Other: "/docs", OtherName: "the cloud API"}))
}

// staticFile answers with b, which caches may keep and revalidate with its ETag.
func staticFile(contentType string, b []byte, page bool) http.Handler {
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if page {
			docsSecurityHeaders(h)
		}
		h.Set("ETag", etag)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		if match := r.Header.Get("If-None-Match"); match == etag || match == "*" {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", contentType)
		_, _ = w.Write(b) // it fails only when the client has gone
	})
}

// docsSecurityHeaders allow the pages nothing but this listener's stylesheet: no script,
// no frame, no form.
func docsSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
}

// docsLinks are the page's links beside the document.
type docsLinks struct {
	JSON, Other, OtherName string
}

// docsPage renders the page of a document once, at start, and serves it.
func docsPage(docJSON []byte, links docsLinks) http.Handler {
	page, err := renderDocs(docJSON, links)
	if err != nil {
		// The documents are embedded and tested: a failure is a broken build.
		panic(fmt.Sprintf("docs page of %s: %v", links.JSON, err))
	}
	return staticFile("text/html; charset=utf-8", page, true)
}

var docsTemplate = template.Must(template.New("docs").Funcs(template.FuncMap{"text": richText, "lower": strings.ToLower}).Parse(docsTemplateText))

func renderDocs(docJSON []byte, links docsLinks) ([]byte, error) {
	var doc oaDoc
	if err := json.Unmarshal(docJSON, &doc); err != nil {
		return nil, err
	}
	view, err := newDocsView(&doc, links)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := docsTemplate.Execute(&buf, view); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// The part of an OpenAPI 3.0 document the page shows. Schemas keep the order their
// properties are written in.
type (
	oaDoc struct {
		Info struct {
			Title, Version, Description string
		}
		Servers []struct{ URL string }
		Tags    []struct{ Name, Description string }
		// Paths keep their order too.
		Paths      ordered[oaPathItem]
		Security   []map[string][]string
		Components struct {
			Schemas         ordered[oaSchema]
			Responses       map[string]*oaResponse
			Parameters      map[string]*oaParameter
			SecuritySchemes ordered[oaSecurityScheme]
		}
	}
	oaPathItem struct {
		Parameters                    []*oaParameter
		Get, Put, Post, Delete, Patch *oaOperation
	}
	oaOperation struct {
		OperationID string
		Tags        []string
		Summary     string
		Description string
		Parameters  []*oaParameter
		RequestBody *oaRequestBody
		Responses   ordered[oaResponse]
		Security    *[]map[string][]string
	}
	oaParameter struct {
		Ref         string `json:"$ref"`
		Name, In    string
		Description string
		Required    bool
		Schema      *oaSchema
	}
	oaRequestBody struct {
		Description string
		Required    bool
		Content     map[string]struct{ Schema *oaSchema }
	}
	oaResponse struct {
		Ref         string `json:"$ref"`
		Description string
		Headers     ordered[struct {
			Ref         string `json:"$ref"`
			Description string
		}]
		Content map[string]struct{ Schema *oaSchema }
	}
	oaSchema struct {
		Ref                  string `json:"$ref"`
		Type                 string
		Format               string
		Description          string
		Enum                 []any
		Default              any
		Example              any
		Nullable             bool
		Minimum, Maximum     *float64
		MinLength, MaxLength *int
		MinItems, MaxItems   *int
		Required             []string
		Properties           ordered[oaSchema]
		Items                *oaSchema
		AllOf, OneOf, AnyOf  []*oaSchema
		AdditionalProperties json.RawMessage
	}
	oaSecurityScheme struct {
		Type, In, Name, Description string
	}
)

// ordered is a JSON object whose members keep their order.
type ordered[T any] []named[T]

type named[T any] struct {
	Name  string
	Value *T
}

func (o *ordered[T]) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("expected an object, got %v", tok)
	}
	for dec.More() {
		tok, err = dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		v := new(T)
		if err := dec.Decode(v); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		*o = append(*o, named[T]{key, v})
	}
	return nil
}

func (o ordered[T]) get(name string) *T {
	for _, n := range o {
		if n.Name == name {
			return n.Value
		}
	}
	return nil
}

// The page's view of a document.
type (
	docsView struct {
		Title, Version, Description, Server string
		Links                               docsLinks
		Security                            []securityView
		Groups                              []groupView
		Schemas                             []schemaView
	}
	securityView struct {
		Name, Where, Description string
	}
	groupView struct {
		Name, Anchor, Description string
		Operations                []operationView
	}
	operationView struct {
		Anchor, Method, Path, Summary, Description string
		Public                                     bool
		Parameters                                 []paramView
		Body                                       *bodyView
		Responses                                  []responseView
	}
	paramView struct {
		Name, In, Type, Description string
		Required                    bool
	}
	bodyView struct {
		Required    bool
		Description string
		Type        typeView
		Fields      []fieldView
	}
	responseView struct {
		Status, Description string
		Headers             []string
		Type                *typeView
		Fields              []fieldView
	}
	// typeView is a schema in one line: its type, with a link when it is a component.
	typeView struct {
		Text   string
		Link   string
		Detail string
	}
	fieldView struct {
		Path        string
		Depth       int
		Type        typeView
		Required    bool
		Description string
	}
	schemaView struct {
		Name, Anchor, Description string
		Type                      typeView
		Fields                    []fieldView
	}
)

func newDocsView(doc *oaDoc, links docsLinks) (*docsView, error) {
	v := &docsView{Title: doc.Info.Title, Version: doc.Info.Version, Description: doc.Info.Description, Links: links}
	if len(doc.Servers) > 0 {
		v.Server = doc.Servers[0].URL
	}
	for _, s := range doc.Components.SecuritySchemes {
		v.Security = append(v.Security, securityView{Name: s.Value.Name, Where: s.Value.In, Description: s.Value.Description})
	}
	r := resolver{doc: doc}
	groups := map[string]*groupView{}
	var order []string
	for _, t := range doc.Tags {
		groups[t.Name] = &groupView{Name: t.Name, Anchor: "tag-" + anchor(t.Name), Description: t.Description}
		order = append(order, t.Name)
	}
	for _, p := range doc.Paths {
		item := p.Value
		for _, mo := range []struct {
			method string
			op     *oaOperation
		}{{"GET", item.Get}, {"POST", item.Post}, {"PUT", item.Put}, {"PATCH", item.Patch}, {"DELETE", item.Delete}} {
			if mo.op == nil {
				continue
			}
			op, err := r.operation(mo.method, p.Name, item, mo.op, len(doc.Security) > 0)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", mo.method, p.Name, err)
			}
			tag := "Other"
			if len(mo.op.Tags) > 0 {
				tag = mo.op.Tags[0]
			}
			g := groups[tag]
			if g == nil {
				g = &groupView{Name: tag, Anchor: "tag-" + anchor(tag)}
				groups[tag] = g
				order = append(order, tag)
			}
			g.Operations = append(g.Operations, op)
		}
	}
	for _, name := range order {
		if g := groups[name]; len(g.Operations) > 0 {
			v.Groups = append(v.Groups, *g)
		}
	}
	for _, s := range doc.Components.Schemas {
		v.Schemas = append(v.Schemas, schemaView{Name: s.Name, Anchor: "schema-" + s.Name, Description: s.Value.Description,
			Type: r.typeOf(s.Value), Fields: r.fields(s.Value, "", 0)})
	}
	return v, nil
}

// resolver renders the parts of one document, following its $refs.
type resolver struct{ doc *oaDoc }

const componentPrefix = "#/components/"

func (r resolver) operation(method, path string, item *oaPathItem, op *oaOperation, secured bool) (operationView, error) {
	v := operationView{Anchor: "op-" + anchor(method+" "+path), Method: method, Path: path, Summary: op.Summary,
		Description: op.Description, Public: secured && op.Security != nil && len(*op.Security) == 0}
	if op.OperationID != "" {
		v.Anchor = "op-" + op.OperationID
	}
	for _, p := range append(slices.Clone(item.Parameters), op.Parameters...) {
		if p.Ref != "" {
			name := strings.TrimPrefix(p.Ref, componentPrefix+"parameters/")
			if p = r.doc.Components.Parameters[name]; p == nil {
				return v, fmt.Errorf("no parameter %s", name)
			}
		}
		t := r.typeOf(p.Schema)
		v.Parameters = append(v.Parameters, paramView{Name: p.Name, In: p.In, Type: t.Text + t.Detail, Description: p.Description, Required: p.Required})
	}
	if b := op.RequestBody; b != nil {
		if c, ok := b.Content["application/json"]; ok && c.Schema != nil {
			// A body's fields are shown in place even when its schema is a component: it
			// is what a caller writes.
			schema := c.Schema
			if schema.Ref != "" {
				schema = r.schema(schema.Ref)
			}
			v.Body = &bodyView{Required: b.Required, Description: b.Description, Type: r.typeOf(c.Schema), Fields: r.fields(schema, "", 0)}
		}
	}
	for _, resp := range op.Responses {
		rv := responseView{Status: resp.Name}
		res := resp.Value
		if res.Ref != "" {
			name := strings.TrimPrefix(res.Ref, componentPrefix+"responses/")
			if res = r.doc.Components.Responses[name]; res == nil {
				return v, fmt.Errorf("no response %s", name)
			}
		}
		rv.Description = res.Description
		for _, h := range res.Headers {
			rv.Headers = append(rv.Headers, h.Name)
		}
		if c, ok := res.Content["application/json"]; ok && c.Schema != nil {
			t := r.typeOf(c.Schema)
			rv.Type, rv.Fields = &t, r.inlineFields(c.Schema)
		}
		v.Responses = append(v.Responses, rv)
	}
	return v, nil
}

// inlineFields lists the fields of a schema written in place (a component is linked to
// instead, its fields shown in its own section).
func (r resolver) inlineFields(s *oaSchema) []fieldView {
	if s.Ref != "" {
		return nil
	}
	return r.fields(s, "", 0)
}

// maxDepth bounds the nesting shown in place.
const maxDepth = 6

// fields lists a schema's properties, those of its inline objects and arrays of objects
// nested under their path (regions[].networking.deploymentCIDR), and those of the
// schemas it is allOf.
func (r resolver) fields(s *oaSchema, prefix string, depth int) []fieldView {
	if s == nil || depth > maxDepth {
		return nil
	}
	var out []fieldView
	for _, part := range s.AllOf {
		sub := part
		if part.Ref != "" {
			sub = r.schema(part.Ref)
		}
		out = mergeFields(out, r.fields(sub, prefix, depth))
		// A part may only add rules to the fields of the others (required: [name]).
		for _, name := range sub.Required {
			if i := slices.IndexFunc(out, func(f fieldView) bool { return f.Path == fieldPath(prefix, name) }); i >= 0 {
				out[i].Required = true
			}
		}
	}
	if s.Items != nil && s.Items.Ref == "" && prefix == "" && len(s.Properties) == 0 {
		return append(out, r.fields(s.Items, "[]", depth)...)
	}
	for _, p := range s.Properties {
		path := fieldPath(prefix, p.Name)
		f := fieldView{Path: path, Depth: depth, Type: r.typeOf(p.Value), Required: slices.Contains(s.Required, p.Name), Description: p.Value.Description}
		out = mergeFields(out, []fieldView{f})
		switch ps := p.Value; {
		case ps.Ref != "":
		case len(ps.Properties) > 0 || len(ps.AllOf) > 0:
			out = mergeFields(out, r.fields(ps, path, depth+1))
		case ps.Items != nil && ps.Items.Ref == "" && (len(ps.Items.Properties) > 0 || len(ps.Items.AllOf) > 0):
			out = mergeFields(out, r.fields(ps.Items, path+"[]", depth+1))
		}
	}
	return out
}

// fieldPath is the path of a field of the object at prefix.
func fieldPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// mergeFields appends more to fields, a field listed again (an allOf part that adds a
// rule to it) updating the first: required if either says so, its description if it had
// none.
func mergeFields(fields, more []fieldView) []fieldView {
	for _, f := range more {
		i := slices.IndexFunc(fields, func(g fieldView) bool { return g.Path == f.Path })
		if i < 0 {
			fields = append(fields, f)
			continue
		}
		fields[i].Required = fields[i].Required || f.Required
		if fields[i].Description == "" {
			fields[i].Description = f.Description
		}
		if fields[i].Type.Text == "" {
			fields[i].Type = f.Type
		}
	}
	return fields
}

func (r resolver) schema(ref string) *oaSchema {
	name := strings.TrimPrefix(ref, componentPrefix+"schemas/")
	if s := r.doc.Components.Schemas.get(name); s != nil {
		return s
	}
	return &oaSchema{}
}

// typeOf renders a schema's type in one line: integer (1 to 65535), array of Task,
// one of: string, object, …
func (r resolver) typeOf(s *oaSchema) typeView {
	if s == nil {
		return typeView{Text: "any"}
	}
	if s.Ref != "" {
		name := strings.TrimPrefix(s.Ref, componentPrefix+"schemas/")
		return typeView{Text: name, Link: "#schema-" + name}
	}
	var t typeView
	switch {
	case s.Type == "array":
		it := r.typeOf(s.Items)
		t = typeView{Text: "array of " + it.Text, Link: it.Link, Detail: it.Detail}
	case len(s.OneOf) > 0 || len(s.AnyOf) > 0:
		var parts []string
		for _, o := range append(slices.Clone(s.OneOf), s.AnyOf...) {
			if o.Type == "" && o.Ref == "" {
				continue // a rule (anyOf: required …), not a type
			}
			parts = append(parts, r.typeOf(o).Text)
		}
		t.Text = strings.Join(parts, " or ")
		if t.Text == "" {
			t.Text = "object"
		}
	case len(s.AllOf) > 0:
		t.Text = "object"
		for _, a := range s.AllOf {
			if a.Ref != "" && len(s.AllOf) == 1 {
				return r.typeOf(a)
			}
		}
	case s.Type == "":
		t.Text = "any"
		if len(s.Properties) > 0 {
			t.Text = "object"
		}
	default:
		t.Text = s.Type
	}
	var details []string
	if s.Format != "" {
		details = append(details, s.Format)
	}
	if len(s.Enum) > 0 {
		vals := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			vals[i] = fmt.Sprint(e)
		}
		details = append(details, "one of "+strings.Join(vals, ", "))
	}
	if s.Minimum != nil && s.Maximum != nil {
		details = append(details, fmt.Sprintf("%g to %g", *s.Minimum, *s.Maximum))
	} else if s.Minimum != nil {
		details = append(details, fmt.Sprintf("at least %g", *s.Minimum))
	}
	if s.MinLength != nil && *s.MinLength > 0 {
		details = append(details, "not empty")
	}
	if s.MaxLength != nil {
		details = append(details, fmt.Sprintf("at most %d long", *s.MaxLength))
	}
	if s.MinItems != nil && *s.MinItems > 0 {
		details = append(details, fmt.Sprintf("at least %d", *s.MinItems))
	}
	if s.MaxItems != nil {
		details = append(details, fmt.Sprintf("at most %d", *s.MaxItems))
	}
	if s.Default != nil {
		details = append(details, fmt.Sprintf("default %v", s.Default))
	}
	if s.Nullable {
		details = append(details, "may be null")
	}
	if len(details) > 0 {
		t.Detail = " (" + strings.Join(details, "; ") + ")"
	}
	return t
}

var nonAnchor = regexp.MustCompile(`[^A-Za-z0-9]+`)

func anchor(s string) string {
	return strings.Trim(strings.ToLower(nonAnchor.ReplaceAllString(s, "-")), "-")
}

var codeSpan = regexp.MustCompile("`([^`]+)`")
var strong = regexp.MustCompile(`\*\*([^*]+)\*\*`)

// richText renders a description: paragraphs at blank lines, `code` and **bold**, all
// else escaped.
func richText(s string) template.HTML {
	var b strings.Builder
	for _, para := range strings.Split(strings.TrimSpace(s), "\n\n") {
		if strings.TrimSpace(para) == "" {
			continue
		}
		text := template.HTMLEscapeString(strings.Join(strings.Fields(para), " "))
		text = codeSpan.ReplaceAllString(text, "<code>$1</code>")
		text = strong.ReplaceAllString(text, "<strong>$1</strong>")
		b.WriteString("<p>" + text + "</p>")
	}
	return template.HTML(b.String()) //nolint:gosec // escaped above; only <p>, <code> and <strong> are added
}
