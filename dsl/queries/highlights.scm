;; Syntax highlighting for editors with tree-sitter (README.md, "Editors"); capture names
;; are Neovim's. tests/compiler/test_grammar.c checks the query against the grammar.
["policy" "act" "using" "context" "service" "upstream" "fallback" "identity" "import"
 "if" "else" "state" "field" "action" "weight" "balance" "health" "retries" "in"] @keyword
(balance policy: (identifier) @function.builtin)
(health_option name: (identifier) @property)
(balance_key kind: (identifier) @variable.builtin)
(instance_declaration type: (identifier) @type)
(setting name: (identifier) @property)
(policy_definition name: (identifier) @function)
(act_declaration name: (identifier) @type)
(state_declaration name: (identifier) @type)
(act_binding type: (identifier) @type)
(using_binding type: (identifier) @type)
(parameter type: (identifier) @type)
(call_expression function: (identifier) @function.call)
(call_expression function: (member_expression field: (identifier) @function.method))
(member_expression field: (identifier) @property)
(section_tag name: (identifier) @attribute)
(self) @variable.builtin
(string) @string
(integer) @number
(duration) @number
[(ip) (cidr) (address)] @constant
(boolean) @constant.builtin
(comment) @comment
["==" "!=" "<" "<=" ">" ">=" "&&" "||" "!" "="] @operator
(policy_separator) @punctuation.special
