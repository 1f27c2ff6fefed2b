["policy" "act" "using" "context" "service" "upstream" "fallback" "import"
 "if" "else" "state" "field" "action" "weight" "in"] @keyword
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
[(ip) (cidr) (address)] @constant
(boolean) @constant.builtin
(comment) @comment
["==" "!=" "<" "<=" ">" ">=" "&&" "||" "!" "="] @operator
(policy_separator) @punctuation.special
