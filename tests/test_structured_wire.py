"""Structured output on the wire: the exact body each provider gets for a pydantic model and
for a dict schema, the strict-mode rewrites included.

Expected bodies are written out from the providers' documented shapes and rules
(``../shared/wire/STRUCTURED.md``, sources read 2026-12-01): OpenAI Chat ``response_format``
and Responses ``text.format`` (§1.1, §2) with the strict subset of §1.2 (every property
required, ``additionalProperties: false``, no ``default``, no ``oneOf``); Anthropic
``output_config.format`` and its subset (§3.1, §3.2), the forced-tool fallback (§3.5);
Gemini ``responseMimeType`` + ``responseJsonSchema`` (§4.1); the compatible providers of §5.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from pydantic import BaseModel, Field

from polythink import ResponseFormat, Source
from polythink.conversion import coerce_messages
from polythink.errors import OutputFormatUnsupportedError, ThinkingUnsupportedError
from polythink.providers import get_provider
from polythink.transports import anthropic, gemini, openai_chat, openai_responses
from polythink.transports.schema import merge_output
from polythink.types import Request, Resolution, Tool


class Line(BaseModel):
    sku: str = Field(description="Stock code")
    qty: int = Field(default=1, ge=1)


class Invoice(BaseModel):
    """An invoice."""

    number: str
    lines: list[Line]
    note: str | None = None


USER = [{"role": "user", "content": "Bill the order"}]

# pydantic's schema of Invoice, the input every wire below starts from.
INVOICE_SCHEMA = {
    "$defs": {
        "Line": {
            "properties": {
                "sku": {"description": "Stock code", "title": "Sku", "type": "string"},
                "qty": {"default": 1, "minimum": 1, "title": "Qty", "type": "integer"},
            },
            "required": ["sku"],
            "title": "Line",
            "type": "object",
        }
    },
    "description": "An invoice.",
    "properties": {
        "number": {"title": "Number", "type": "string"},
        "lines": {"items": {"$ref": "#/$defs/Line"}, "title": "Lines", "type": "array"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Note"},
    },
    "required": ["number", "lines"],
    "title": "Invoice",
    "type": "object",
}

# OpenAI strict mode (§1.2): all properties required, additionalProperties false on every
# object, no default anywhere ("'default' is not permitted").
OPENAI_INVOICE = {
    "$defs": {
        "Line": {
            "properties": {
                "sku": {"description": "Stock code", "title": "Sku", "type": "string"},
                "qty": {"minimum": 1, "title": "Qty", "type": "integer"},
            },
            "required": ["sku", "qty"],
            "title": "Line",
            "type": "object",
            "additionalProperties": False,
        }
    },
    "description": "An invoice.",
    "properties": {
        "number": {"title": "Number", "type": "string"},
        "lines": {"items": {"$ref": "#/$defs/Line"}, "title": "Lines", "type": "array"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Note"},
    },
    "required": ["number", "lines", "note"],
    "title": "Invoice",
    "type": "object",
    "additionalProperties": False,
}

# Anthropic (§3.2): additionalProperties false, required as given, and what it lacks
# (minimum, default) as words in the description.
ANTHROPIC_INVOICE = {
    "$defs": {
        "Line": {
            "properties": {
                "sku": {"description": "Stock code", "title": "Sku", "type": "string"},
                "qty": {
                    "title": "Qty",
                    "type": "integer",
                    "description": "(default: 1, minimum: 1)",
                },
            },
            "required": ["sku"],
            "title": "Line",
            "type": "object",
            "additionalProperties": False,
        }
    },
    "description": "An invoice.",
    "properties": {
        "number": {"title": "Number", "type": "string"},
        "lines": {"items": {"$ref": "#/$defs/Line"}, "title": "Lines", "type": "array"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Note"},
    },
    "required": ["number", "lines"],
    "title": "Invoice",
    "type": "object",
    "additionalProperties": False,
}

# Gemini responseJsonSchema (§4.1): its documented keywords only (default is not one).
GEMINI_INVOICE = {
    "$defs": {
        "Line": {
            "properties": {
                "sku": {"description": "Stock code", "title": "Sku", "type": "string"},
                "qty": {"minimum": 1, "title": "Qty", "type": "integer"},
            },
            "required": ["sku"],
            "title": "Line",
            "type": "object",
        }
    },
    "description": "An invoice.",
    "properties": {
        "number": {"title": "Number", "type": "string"},
        "lines": {"items": {"$ref": "#/$defs/Line"}, "title": "Lines", "type": "array"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Note"},
    },
    "required": ["number", "lines"],
    "title": "Invoice",
    "type": "object",
}

# A dict schema with the two shapes openai-python's strict helper sends on unchanged and the
# API refuses (§1.4 items 4 and 6): a non-null default and a oneOf (with pydantic's
# discriminator); and a $ref beside a description, which the API refuses too (§1.2).
PET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pet": {
            "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
            "discriminator": {"propertyName": "kind"},
        },
        "legs": {"type": "integer", "default": 4},
        "owner": {"$ref": "#/$defs/Owner", "description": "Who feeds it"},
    },
    "required": ["pet"],
    "$defs": {
        "Cat": {"type": "object", "properties": {"kind": {"const": "cat"}}, "required": ["kind"]},
        "Dog": {
            "type": "object",
            "properties": {"kind": {"const": "dog"}, "good": {"type": "boolean", "default": True}},
            "required": ["kind"],
        },
        "Owner": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    },
}
OPENAI_PET = {
    "type": "object",
    "properties": {
        "pet": {"anyOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]},
        "legs": {"type": "integer"},
        "owner": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": False,
            "description": "Who feeds it",
        },
    },
    "required": ["pet", "legs", "owner"],
    "additionalProperties": False,
    "$defs": {
        "Cat": {
            "type": "object",
            "properties": {"kind": {"const": "cat"}},
            "required": ["kind"],
            "additionalProperties": False,
        },
        "Dog": {
            "type": "object",
            "properties": {"kind": {"const": "dog"}, "good": {"type": "boolean"}},
            "required": ["kind", "good"],
            "additionalProperties": False,
        },
        "Owner": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": False,
        },
    },
}


def request(response_format: Any, messages: Any = USER, **fields: Any) -> Request:
    return Request(
        messages=coerce_messages(messages),
        response_format=ResponseFormat.coerce(response_format),
        **fields,
    )


def chat_body(provider: str, model: str, req: Request) -> dict[str, Any]:
    return openai_chat.build_body(req, model=model, profile=get_provider(provider))


def gemini_body(req: Request, model: str = "gemini-3-flash") -> dict[str, Any]:
    return gemini.build_body(req, profile=get_provider("gemini"), model=model)


def test_pydantic_schema_is_the_input_the_wires_start_from() -> None:
    assert Invoice.model_json_schema() == INVOICE_SCHEMA


def test_openai_chat_body_for_a_pydantic_model() -> None:
    body = chat_body("openai", "gpt-5.5", request(Invoice))
    assert body == {
        "model": "gpt-5.5",
        "messages": USER,
        "stream": False,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "Invoice", "schema": OPENAI_INVOICE, "strict": True},
        },
    }


def test_openai_chat_body_for_a_dict_schema_fixes_default_oneof_and_ref_siblings() -> None:
    fmt = ResponseFormat(PET_SCHEMA, name="pet_record", description="One pet")
    body = chat_body("openai", "gpt-5.5", request(fmt))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "pet_record",
            "schema": OPENAI_PET,
            "strict": True,
            "description": "One pet",
        },
    }
    # The caller's schema is left as it was.
    assert PET_SCHEMA["properties"]["legs"] == {"type": "integer", "default": 4}


def test_openai_envelope_keeps_its_own_strict_false() -> None:
    # OpenAI's envelope without "strict" means strict false (openai_openapi.yaml
    # ResponseFormatJsonSchema): the schema goes out as written, as guidance.
    envelope = {"type": "json_schema", "json_schema": {"name": "pets", "schema": PET_SCHEMA}}
    body = chat_body("openai", "gpt-5.5", request(envelope))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "pets", "schema": PET_SCHEMA, "strict": False},
    }


def test_responses_body_is_text_format_flat() -> None:
    req = request(Invoice)
    body = openai_responses.build_body(
        req, model="gpt-5.5", profile=get_provider("openai-responses")
    )
    assert body["text"] == {
        "format": {
            "type": "json_schema",
            "name": "Invoice",
            "schema": OPENAI_INVOICE,
            "strict": True,
        }
    }
    pet = openai_responses.build_body(
        request(PET_SCHEMA), model="gpt-5.5", profile=get_provider("openai-responses")
    )
    assert pet["text"]["format"]["schema"] == OPENAI_PET
    assert pet["text"]["format"]["name"] == "response"


def test_anthropic_body_uses_output_config_format() -> None:
    body = anthropic.build_body(
        request(Invoice), model="claude-sonnet-4-5", profile=get_provider("anthropic")
    )
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Bill the order"}]}],
        "stream": False,
        "output_config": {"format": {"type": "json_schema", "schema": ANTHROPIC_INVOICE}},
    }


def test_anthropic_format_sits_beside_the_effort_of_adaptive_thinking() -> None:
    resolution = Resolution(
        requested_effort=None,
        applied_effort=None,
        payload={"thinking": {"type": "adaptive"}, "output_config": {"effort": "low"}},
    )
    req = request(PET_SCHEMA, resolution=resolution)
    profile = get_provider("anthropic")
    first = anthropic.build_body(req, model="claude-opus-4-6", profile=profile)
    assert first["thinking"] == {"type": "adaptive"}
    assert first["output_config"]["effort"] == "low"
    assert first["output_config"]["format"]["schema"]["properties"]["pet"] == {
        "anyOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]
    }
    assert first["output_config"]["format"]["schema"]["properties"]["owner"] == {
        "$ref": "#/$defs/Owner"
    }
    assert first["output_config"]["format"]["schema"]["properties"]["legs"] == {
        "type": "integer",
        "description": "(default: 4)",
    }
    # The remembered schema is not changed by the merge: the next call's body is the same.
    second = anthropic.build_body(request(PET_SCHEMA), model="claude-opus-4-6", profile=profile)
    assert second["output_config"] == {"format": first["output_config"]["format"]}


def test_anthropic_without_output_config_forces_one_output_tool() -> None:
    body = anthropic.build_body(
        request(Invoice), model="claude-sonnet-4-20250514", profile=get_provider("anthropic")
    )
    assert "output_config" not in body
    assert body["tools"] == [
        {
            "name": "Invoice",
            "description": "Give the answer as this tool's input.",
            "input_schema": ANTHROPIC_INVOICE,
        }
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "Invoice"}


def test_gemini_body_uses_response_json_schema() -> None:
    body = gemini_body(request(Invoice))
    assert body == {
        "contents": [{"role": "user", "parts": [{"text": "Bill the order"}]}],
        "generationConfig": {
            "responseMimeType": "application/json",
            "responseJsonSchema": GEMINI_INVOICE,
        },
    }
    capped = gemini_body(request({"type": "json_object"}, max_tokens=300))
    assert capped["generationConfig"] == {
        "maxOutputTokens": 300,
        "responseMimeType": "application/json",
    }


def test_gemini_schema_turns_const_into_enum_and_drops_unknown_keywords() -> None:
    body = gemini_body(request(PET_SCHEMA))
    schema = body["generationConfig"]["responseJsonSchema"]
    assert schema["properties"]["pet"] == {
        "anyOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]
    }
    assert schema["properties"]["legs"] == {"type": "integer"}
    assert schema["properties"]["owner"] == {"$ref": "#/$defs/Owner"}
    assert schema["$defs"]["Cat"] == {
        "type": "object",
        "properties": {"kind": {"enum": ["cat"]}},
        "required": ["kind"],
    }


def test_deepseek_gets_json_mode_with_the_schema_in_the_system_prompt() -> None:
    body = chat_body("deepseek", "deepseek-v4-pro", request(Invoice))
    schema_text = json.dumps(INVOICE_SCHEMA, separators=(",", ":"), ensure_ascii=False)
    assert body["response_format"] == {"type": "json_object"}
    # A per-call instruction: it ends the last user message, after the conversation.
    assert body["messages"] == [
        {
            "role": "user",
            "content": "Bill the order\n\nAnswer with one JSON object and nothing else, valid "
            "against this JSON Schema:\n" + schema_text,
        },
    ]


@pytest.mark.parametrize(("provider", "model"), [("glm", "glm-5.3"), ("kimi", "kimi-k3")])
def test_json_mode_only_providers_get_json_object(provider: str, model: str) -> None:
    body = chat_body(provider, model, request(Invoice))
    assert body["response_format"] == {"type": "json_object"}
    assert body["messages"][-1]["content"].startswith(
        "Bill the order\n\nAnswer with one JSON object and nothing else"
    )


def test_the_schema_instruction_follows_the_conversation_and_suffix() -> None:
    messages = [{"role": "system", "content": "Be terse."}, *USER]
    req = request({"type": "json_object"}, messages, system_suffix="Today is Monday.")
    body = chat_body("minimax", "MiniMax-M3", req)
    assert "response_format" not in body
    assert body["messages"] == [
        {"role": "system", "content": "Be terse."},
        {
            "role": "user",
            "content": "Bill the order\n\nToday is Monday.\n\nAnswer with one JSON object and "
            "nothing else.",
        },
    ]


def test_qwen_takes_json_schema_only_on_its_listed_models() -> None:
    listed = chat_body("qwen", "qwen3-max-2025-09-23", request(Invoice))
    assert listed["response_format"]["json_schema"] == {
        "name": "Invoice",
        "schema": OPENAI_INVOICE,
        "strict": True,
    }
    other = chat_body("qwen", "qwen3.7-plus", request(Invoice))
    assert other["response_format"] == {"type": "json_object"}


def test_openrouter_requires_the_parameter_of_its_endpoints() -> None:
    body = chat_body("openrouter", "openai/gpt-5", request(Invoice))
    assert body["provider"] == {"require_parameters": True}
    assert body["response_format"]["json_schema"]["schema"] == OPENAI_INVOICE
    # A caller's provider preferences are kept beside it.
    req = request(Invoice, extra_body={"provider": {"order": ["openai"]}})
    merged = chat_body("openrouter", "openai/gpt-5", req)
    assert merged["provider"] == {"require_parameters": True, "order": ["openai"]}
    again = chat_body("openrouter", "openai/gpt-5", request(Invoice))
    assert again["provider"] == {"require_parameters": True}


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("xai", "grok-4.3"),
        ("mistral", "mistral-small-latest"),
        ("vllm", "qwen3-32b"),
        ("ollama", "qwen3-32b"),
    ],
)
def test_providers_that_take_the_schema_as_written(provider: str, model: str) -> None:
    body = chat_body(provider, model, request(Invoice))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Invoice", "schema": INVOICE_SCHEMA, "strict": True},
    }


def test_groq_is_strict_only_on_gpt_oss() -> None:
    strict = chat_body("groq", "openai/gpt-oss-120b", request(Invoice))
    assert strict["response_format"]["json_schema"] == {
        "name": "Invoice",
        "schema": OPENAI_INVOICE,
        "strict": True,
    }
    loose = chat_body("groq", "qwen/qwen3-32b", request(Invoice))
    assert loose["response_format"]["json_schema"] == {
        "name": "Invoice",
        "schema": INVOICE_SCHEMA,
        "strict": False,
    }
    with pytest.raises(OutputFormatUnsupportedError, match="gpt-oss-20b, gpt-oss-120b"):
        chat_body("groq", "qwen/qwen3-32b", request(ResponseFormat(Invoice, strict=True)))


def test_json_mode_adds_the_word_json_only_when_no_message_has_it() -> None:
    bare = chat_body("openai", "gpt-5.5", request({"type": "json_object"}))
    assert bare["messages"] == [
        *USER,
        {"role": "system", "content": "Answer with one JSON object and nothing else."},
    ]
    said = [{"role": "user", "content": "List three primes as JSON."}]
    body = chat_body("openai", "gpt-5.5", request({"type": "json_object"}, said))
    assert body["messages"] == said
    assert body["response_format"] == {"type": "json_object"}


def test_responses_json_mode_puts_the_word_in_an_input_message() -> None:
    # "instructions alone did not satisfy it" (§1.1): a system message ends the input.
    messages = [{"role": "system", "content": "Be terse."}, *USER]
    body = openai_responses.build_body(
        request({"type": "json_object"}, messages),
        model="gpt-5.5",
        profile=get_provider("openai-responses"),
    )
    assert body["instructions"] == "Be terse."
    assert body["input"] == [
        *USER,
        {"role": "system", "content": "Answer with one JSON object and nothing else."},
    ]
    assert body["text"] == {"format": {"type": "json_object"}}


def test_an_extra_body_override_never_reaches_the_remembered_schema() -> None:
    override = {"response_format": {"json_schema": {"schema": {"title": "Changed"}}}}
    changed = chat_body("openai", "gpt-5.5", request(Invoice, extra_body=override))
    assert changed["response_format"]["json_schema"]["schema"]["title"] == "Changed"
    clean = chat_body("openai", "gpt-5.5", request(Invoice))
    assert clean["response_format"]["json_schema"]["schema"] == OPENAI_INVOICE


def test_merge_output_shares_the_schema_but_not_the_top_level() -> None:
    schema = {"type": "object"}
    fields = {"generationConfig": {"responseJsonSchema": schema}}
    body: dict[str, Any] = {"generationConfig": {"maxOutputTokens": 9}}
    merge_output(body, fields, (None, None))
    assert body == {"generationConfig": {"maxOutputTokens": 9, "responseJsonSchema": schema}}
    assert body["generationConfig"] is not fields["generationConfig"]
    assert body["generationConfig"]["responseJsonSchema"] is schema


@pytest.mark.parametrize(
    ("schema", "wire", "words"),
    [
        (
            {
                "type": "object",
                "properties": {
                    "tags": {"type": "object", "additionalProperties": {"type": "string"}}
                },
            },
            "openai",
            "properties/tags allows keys beyond its properties",
        ),
        ({"type": "array", "items": {"type": "string"}}, "openai", "the root must be an object"),
        (
            {"type": "object", "properties": {"x": {"not": {"type": "string"}}}},
            "openai",
            "properties/x uses 'not'",
        ),
        (
            {
                "type": "object",
                "properties": {"child": {"$ref": "#"}},
            },
            "anthropic",
            "the schema is recursive",
        ),
        (
            {"type": "object", "properties": {"anything": {}}},
            "anthropic",
            "properties/anything has no type",
        ),
        (
            {
                "type": "object",
                "properties": {f"p{i}": {"type": "string"} for i in range(25)},
            },
            "anthropic",
            "25 optional properties",
        ),
    ],
)
def test_a_schema_a_wire_cannot_express_is_refused_before_sending(
    schema: dict[str, Any], wire: str, words: str
) -> None:
    req = request(schema)
    build = {
        "openai": lambda: chat_body("openai", "gpt-5.5", req),
        "anthropic": lambda: anthropic.build_body(
            req, model="claude-sonnet-4-5", profile=get_provider("anthropic")
        ),
    }[wire]
    with pytest.raises(OutputFormatUnsupportedError, match=words) as caught:
        build()
    assert caught.value.error_type == "unsupported_response_format"
    assert isinstance(caught.value, ValueError)


def test_openai_limits_nesting_to_ten_levels() -> None:
    leaf: dict[str, Any] = {"type": "string"}
    for _ in range(11):
        leaf = {"type": "object", "properties": {"x": leaf}}
    with pytest.raises(OutputFormatUnsupportedError, match="nested 11 levels deep"):
        chat_body("openai", "gpt-5.5", request(leaf))


@pytest.mark.parametrize(
    ("provider", "model", "kind", "words"),
    [
        ("gemini", "gemini-2.5-flash", Invoice, "before Gemini 3"),
        ("groq", "qwen/qwen3-32b", {"type": "json_object"}, "Groq rejects JSON mode"),
        ("deepseek", "deepseek-v4-pro", ResponseFormat(Invoice, strict=True), "no json_schema"),
    ],
)
def test_combinations_the_providers_reject_are_refused(
    provider: str, model: str, kind: Any, words: str
) -> None:
    tool = Tool(name="lookup", parameters={"type": "object"})
    req = request(kind, tools=(tool,))
    with pytest.raises(OutputFormatUnsupportedError, match=words):
        gemini_body(req, model) if provider == "gemini" else chat_body(provider, model, req)


def test_gemini_3_combines_json_with_function_tools() -> None:
    tool = Tool(name="lookup", parameters={"type": "object"})
    body = gemini_body(request(Invoice, tools=(tool,)))
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    assert body["tools"][0]["functionDeclarations"][0]["name"] == "lookup"


def test_anthropic_fallback_with_manual_thinking_is_refused_or_unforced() -> None:
    resolution = Resolution(
        requested_effort=None,
        applied_effort=None,
        payload={"thinking": {"type": "enabled", "budget_tokens": 2048}, "max_tokens": 8192},
    )
    req = request(Invoice, resolution=resolution)
    for drop in (False, True):
        source = Source(
            "anthropic",
            "claude-sonnet-4-0",
            api_key="k",
            base_url="http://127.0.0.1:9",
            drop_params=drop,
        )
        transport = anthropic.AnthropicTransport(
            source=source,
            index=0,
            profile=get_provider("anthropic"),
            client=None,  # type: ignore[arg-type]
            api_key="k",
        )
        if not drop:
            with pytest.raises(ThinkingUnsupportedError, match="manual thinking rejects"):
                transport.body(req)
            continue
        body = transport.body(req)
        assert body["tool_choice"] == {"type": "auto"}
        assert body["tools"][0]["name"] == "Invoice"


def test_anthropic_refuses_structured_output_after_a_prefill() -> None:
    messages = [*USER, {"role": "assistant", "content": "{"}]
    with pytest.raises(OutputFormatUnsupportedError, match="prefilled"):
        anthropic.build_body(
            request(Invoice, messages), model="claude-sonnet-4-5", profile=get_provider("anthropic")
        )


def test_anthropic_json_object_is_an_instruction() -> None:
    body = anthropic.build_body(
        request({"type": "json_object"}),
        model="claude-sonnet-4-5",
        profile=get_provider("anthropic"),
    )
    assert "system" not in body
    assert body["messages"][-1] == {
        "role": "user",
        "content": "Answer with one JSON object and nothing else.",
    }
    assert "output_config" not in body


# ---------------------------------------------------------------- name and description

DESCRIBED = ResponseFormat(Invoice, name="m_out", description="Bill lines")


def test_openai_sends_the_name_and_description_in_their_fields() -> None:
    body = chat_body("openai", "gpt-5.5", request(DESCRIBED))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "m_out",
            "schema": OPENAI_INVOICE,
            "strict": True,
            "description": "Bill lines",
        },
    }


def test_anthropic_and_gemini_carry_the_description_in_the_schema() -> None:
    # Neither output_config.format (§3.1) nor generationConfig (§4.1) has a name or a
    # description: the description opens the schema's own; the name has nowhere to go.
    described = "Bill lines\n\nAn invoice."
    body = anthropic.build_body(
        request(DESCRIBED), model="claude-sonnet-4-5", profile=get_provider("anthropic")
    )
    assert body["output_config"] == {
        "format": {
            "type": "json_schema",
            "schema": {**ANTHROPIC_INVOICE, "description": described},
        }
    }
    config = gemini_body(request(DESCRIBED))["generationConfig"]
    assert config == {
        "responseMimeType": "application/json",
        "responseJsonSchema": {**GEMINI_INVOICE, "description": described},
    }
    assert "m_out" not in json.dumps([body, config])
    # A schema without a description of its own gets the format's alone.
    bare = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    fmt = ResponseFormat(bare, description="One count")
    assert gemini_body(request(fmt))["generationConfig"]["responseJsonSchema"] == {
        **bare,
        "description": "One count",
    }
    # The undescribed format still sends the schema as it was.
    plain = anthropic.build_body(
        request(Invoice), model="claude-sonnet-4-5", profile=get_provider("anthropic")
    )
    assert plain["output_config"]["format"]["schema"] == ANTHROPIC_INVOICE


def test_anthropic_fallback_names_and_describes_its_output_tool() -> None:
    body = anthropic.build_body(
        request(DESCRIBED), model="claude-sonnet-4-20250514", profile=get_provider("anthropic")
    )
    assert body["tools"] == [
        {"name": "m_out", "description": "Bill lines", "input_schema": ANTHROPIC_INVOICE}
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "m_out"}


def test_json_mode_quotes_the_schema_with_the_description() -> None:
    body = chat_body("deepseek", "deepseek-v4-pro", request(DESCRIBED))
    described = {**INVOICE_SCHEMA, "description": "Bill lines\n\nAn invoice."}
    schema_text = json.dumps(described, separators=(",", ":"), ensure_ascii=False)
    assert body["messages"][-1] == {
        "role": "user",
        "content": "Bill the order\n\nAnswer with one JSON object and nothing else, valid "
        "against this JSON Schema:\n" + schema_text,
    }


# ---------------------------------------------------------------- {"type": "text"}

PLAIN_WIRES = [
    ("openai", "gpt-5.5"),
    ("openai-responses", "gpt-5.5"),
    ("anthropic", "claude-sonnet-4-5"),
    ("gemini", "gemini-3-flash"),
    ("deepseek", "deepseek-v4-pro"),
]


@pytest.mark.parametrize(("provider", "model"), PLAIN_WIRES)
def test_text_format_is_the_plain_default_and_sends_nothing(provider: str, model: str) -> None:
    # {"type": "text"} is OpenAI's default format (§1.1): the body is the one without it.
    def body(fmt: Any) -> dict[str, Any]:
        profile = get_provider(provider)
        req = request(fmt)
        if profile.wire == "openai_responses":
            return openai_responses.build_body(req, model=model, profile=profile)
        if profile.wire == "anthropic":
            return anthropic.build_body(req, model=model, profile=profile)
        if profile.wire == "gemini":
            return gemini.build_body(req, model=model, profile=profile)
        return chat_body(provider, model, req)

    assert request({"type": "text"}).response_format is None
    assert body({"type": "text"}) == body(None)
    assert not {"response_format", "text", "output_config", "generationConfig"} & set(body(None))


# ---------------------------------------------------------------- Tool(strict=...)

STRICT_TOOL = Tool(
    name="lookup",
    description="Find a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": ["string", "null"]}},
        "required": ["city"],
        "additionalProperties": False,
    },
    strict=True,
)


def test_anthropic_tools_carry_strict_when_set() -> None:
    # anthropic-sdk-python ToolParam.strict: "When true, guarantees schema validation on
    # tool names and inputs"; tools with strict: true count toward the limits of §3.2.
    loose = dataclasses.replace(STRICT_TOOL, name="note", strict=False)
    unset = dataclasses.replace(STRICT_TOOL, name="plain", strict=None)
    req = Request(messages=coerce_messages(USER), tools=(STRICT_TOOL, loose, unset))
    body = anthropic.build_body(req, model="claude-sonnet-4-5", profile=get_provider("anthropic"))
    schema = dict(STRICT_TOOL.parameters)
    assert body["tools"] == [
        {"name": "lookup", "description": "Find a city.", "input_schema": schema, "strict": True},
        {"name": "note", "description": "Find a city.", "input_schema": schema, "strict": False},
        {"name": "plain", "description": "Find a city.", "input_schema": schema},
    ]


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        (None, {"functionCallingConfig": {"mode": "VALIDATED"}}),
        ("auto", {"functionCallingConfig": {"mode": "VALIDATED"}}),
        ("required", {"functionCallingConfig": {"mode": "ANY"}}),
        (
            {"type": "function", "function": {"name": "lookup"}},
            {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["lookup"]}},
        ),
        ("none", {"functionCallingConfig": {"mode": "NONE"}}),
    ],
)
def test_gemini_validates_the_calls_of_a_call_with_a_strict_tool(
    choice: Any, config: dict[str, Any]
) -> None:
    # FunctionCallingConfig.Mode VALIDATED: "will validate function calls with constrained
    # decoding" (google_generativelanguage_v1beta_content.proto); Gemini has no per-function
    # strict. A forced call keeps ANY, and NONE calls nothing.
    req = Request(messages=coerce_messages(USER), tools=(STRICT_TOOL,), tool_choice=choice)
    body = gemini_body(req)
    assert body["toolConfig"] == config
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "lookup",
                    "description": "Find a city.",
                    "parametersJsonSchema": STRICT_TOOL.parameters,
                }
            ]
        }
    ]
    loose = Request(
        messages=coerce_messages(USER),
        tools=(dataclasses.replace(STRICT_TOOL, strict=False),),
        tool_choice=choice,
    )
    assert gemini_body(loose).get("toolConfig") == (None if choice is None else _unstrict(config))


def _unstrict(config: dict[str, Any]) -> dict[str, Any]:
    calling = config["functionCallingConfig"]
    if calling["mode"] == "VALIDATED":
        return {"functionCallingConfig": {"mode": "AUTO"}}
    return config
