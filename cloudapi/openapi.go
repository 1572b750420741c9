package cloudapi

import _ "embed" // the OpenAPI document

// The OpenAPI 3.0 document of the API is written in openapi.yaml; openapi.json is its
// JSON form, which is what is served (GET /v1/openapi.json) and what the tests validate
// the API's traffic against. TestOpenAPIJSONUpToDate fails when it is stale.
//
//go:generate go run ../internal/apitest/openapijson openapi.yaml openapi.json

//go:embed openapi.json
var openAPIJSON []byte

// OpenAPI returns the OpenAPI 3.0 document of the API, as JSON. The bytes are shared:
// callers must not modify them.
func OpenAPI() []byte { return openAPIJSON }
