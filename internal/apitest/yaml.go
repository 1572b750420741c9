package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// YAMLToJSON converts a YAML document (an OpenAPI document's source) to indented JSON,
// keeping the order of every mapping: the served document reads in the order it was
// written. Anchors and aliases are resolved; mapping keys become strings.
func YAMLToJSON(src []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := writeJSON(&out, &doc); err != nil {
		return nil, err
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, out.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	indented.WriteByte('\n')
	return indented.Bytes(), nil
}

func writeJSON(out *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("line %d: a document must hold one value", n.Line)
		}
		return writeJSON(out, n.Content[0])
	case yaml.AliasNode:
		return writeJSON(out, n.Alias)
	case yaml.MappingNode:
		out.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: a mapping key must be a scalar", k.Line)
			}
			if i > 0 {
				out.WriteByte(',')
			}
			key, err := json.Marshal(k.Value)
			if err != nil {
				return err
			}
			out.Write(key)
			out.WriteByte(':')
			if err := writeJSON(out, v); err != nil {
				return err
			}
		}
		out.WriteByte('}')
	case yaml.SequenceNode:
		out.WriteByte('[')
		for i, v := range n.Content {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := writeJSON(out, v); err != nil {
				return err
			}
		}
		out.WriteByte(']')
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		out.Write(b)
	default:
		return fmt.Errorf("line %d: unexpected YAML node", n.Line)
	}
	return nil
}
