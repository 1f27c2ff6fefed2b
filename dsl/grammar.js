module.exports = grammar({name:'l7', rules:{source_file: $ => repeat('x')}});
