// Command openapijson writes the JSON form of an OpenAPI document written in YAML:
//
//	go run ./internal/apitest/openapijson openapi.yaml openapi.json
//
// The packages that serve a document embed the JSON (go:generate runs this), and a test
// of theirs checks that it is up to date.
package main

import (
	"fmt"
	"os"

	"clouddb/internal/apitest"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: openapijson in.yaml out.json")
		os.Exit(2)
	}
	src, err := os.ReadFile(os.Args[1])
	if err == nil {
		var out []byte
		if out, err = apitest.YAMLToJSON(src); err == nil {
			err = os.WriteFile(os.Args[2], out, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapijson:", err)
		os.Exit(1)
	}
}
