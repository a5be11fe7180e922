//! Redfish errors: an HTTP status plus a `Base` registry message, rendered
//! as the JSON error body clients parse (`error.code`, `error.message`,
//! `error.@Message.ExtendedInfo`).

use serde_json::{json, Value};

/// Registry prefix of every message this service emits.
pub const BASE_REGISTRY: &str = "Base.1.8";

/// A request that cannot be served, as the client will see it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status} {message_id}: {message}")]
pub struct RedfishError {
    pub status: u16,
    /// Message key inside the Base registry (`ResourceMissingAtURI`).
    pub message_id: &'static str,
    pub message: String,
    pub args: Vec<String>,
    pub resolution: &'static str,
    /// Extra response headers (`Allow`, `WWW-Authenticate`).
    pub headers: Vec<(&'static str, String)>,
}

impl RedfishError {
    fn new(status: u16, message_id: &'static str, message: String, args: Vec<String>) -> Self {
        RedfishError {
            status,
            message_id,
            message,
            args,
            resolution: "",
            headers: Vec::new(),
        }
    }

    fn resolution(mut self, r: &'static str) -> Self {
        self.resolution = r;
        self
    }

    pub(crate) fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn not_found(uri: &str) -> Self {
        Self::new(
            404,
            "ResourceMissingAtURI",
            format!("The resource at the URI {uri} was not found."),
            vec![uri.to_string()],
        )
        .resolution(
            "Place a valid resource at the URI or correct the URI and resubmit the request.",
        )
    }

    pub fn method_not_allowed(method: &str, uri: &str, allow: &[&str]) -> Self {
        Self::new(
            405,
            "ActionNotSupported",
            format!("The method {method} is not supported on {uri}."),
            vec![method.to_string()],
        )
        .resolution("Use one of the methods listed in the Allow header.")
        .header("Allow", allow.join(", "))
    }

    pub fn malformed_json(detail: &str) -> Self {
        Self::new(
            400,
            "MalformedJSON",
            format!("The request body submitted was malformed JSON and could not be parsed by the receiving service: {detail}."),
            vec![],
        )
        .resolution("Ensure that the request body is valid JSON and resubmit the request.")
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnrecognizedRequestBody",
            format!("The service detected a request body with the content type '{content_type}'; only application/json is accepted."),
            vec![content_type.to_string()],
        )
        .resolution("Send the request body as application/json.")
    }

    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            413,
            "GeneralError",
            format!("The request body exceeds the limit of {limit} bytes."),
            vec![],
        )
        .resolution("Send a smaller request body.")
    }

    pub fn value_not_in_list(property: &str, value: &str) -> Self {
        Self::new(
            400,
            "PropertyValueNotInList",
            format!("The value '{value}' for the property {property} is not in the list of acceptable values."),
            vec![value.to_string(), property.to_string()],
        )
        .resolution("Choose a value from the enumeration list that the implementation can support and resubmit the request if the operation failed.")
    }

    pub fn property_type(property: &str, value: &str) -> Self {
        Self::new(
            400,
            "PropertyValueTypeError",
            format!("The value '{value}' for the property {property} is of a different type than the property can accept."),
            vec![value.to_string(), property.to_string()],
        )
        .resolution("Correct the value for the property in the request body and resubmit the request if the operation failed.")
    }

    pub fn property_unknown(property: &str) -> Self {
        Self::new(
            400,
            "PropertyUnknown",
            format!("The property {property} is not in the list of valid properties for the resource."),
            vec![property.to_string()],
        )
        .resolution("Remove the unknown property from the request body and resubmit the request if the operation failed.")
    }

    pub fn property_not_writable(property: &str) -> Self {
        Self::new(
            400,
            "PropertyNotWritable",
            format!("The property {property} is a read only property and cannot be assigned a value."),
            vec![property.to_string()],
        )
        .resolution("Remove the property from the request body and resubmit the request if the operation failed.")
    }

    pub fn property_missing(property: &str) -> Self {
        Self::new(
            400,
            "PropertyMissing",
            format!("The property {property} is a required property and must be included in the request."),
            vec![property.to_string()],
        )
        .resolution("Ensure that the property is in the request body and has a valid value and resubmit the request if the operation failed.")
    }

    pub fn action_parameter_missing(action: &str, parameter: &str) -> Self {
        Self::new(
            400,
            "ActionParameterMissing",
            format!("The action {action} requires the parameter {parameter} to be present in the request body."),
            vec![action.to_string(), parameter.to_string()],
        )
        .resolution("Supply the action with the required parameter in the request body when the request is resubmitted.")
    }

    pub fn action_parameter_not_supported(action: &str, parameter: &str, value: &str) -> Self {
        Self::new(
            400,
            "ActionParameterNotSupported",
            format!("The value '{value}' of parameter {parameter} is not supported by the action {action}."),
            vec![value.to_string(), parameter.to_string(), action.to_string()],
        )
        .resolution("Remove the parameter supplied and resubmit the request if the operation failed.")
    }

    pub fn action_parameter_format(action: &str, parameter: &str, value: &str, why: &str) -> Self {
        Self::new(
            400,
            "ActionParameterValueFormatError",
            format!("The value '{value}' for the parameter {parameter} in the action {action} is invalid: {why}."),
            vec![value.to_string(), parameter.to_string(), action.to_string()],
        )
        .resolution("Correct the value for the parameter in the request body and resubmit the request if the operation failed.")
    }

    pub fn action_parameter_unknown(action: &str, parameter: &str) -> Self {
        Self::new(
            400,
            "ActionParameterUnknown",
            format!("The action {action} was submitted with the invalid parameter {parameter}."),
            vec![action.to_string(), parameter.to_string()],
        )
        .resolution(
            "Correct the invalid parameter and resubmit the request if the operation failed.",
        )
    }

    /// UEFI HTTP boot (`UefiHttp`, `HttpBootUri`): not offered, and why.
    pub fn uefi_http_unsupported(property: &str, value: &str) -> Self {
        Self::new(
            400,
            "PropertyValueNotInList",
            format!("The value '{value}' for the property {property} is not supported: this BMC boots images only as virtual media, so UEFI HTTP boot is not offered; insert the image with VirtualMedia.InsertMedia and boot Cd (Ironic's redfish-virtual-media boot interface)."),
            vec![value.to_string(), property.to_string()],
        )
        .resolution("Use virtual media: InsertMedia, then BootSourceOverrideTarget Cd.")
    }

    /// A PATCH of `SecureBootEnable` the domain's firmware cannot honour.
    pub fn secure_boot_fixed(enable: bool, why: &str) -> Self {
        Self::new(
            400,
            "PropertyValueNotInList",
            format!("The value '{enable}' for the property SecureBootEnable cannot be applied: {why}."),
            vec![enable.to_string(), "SecureBootEnable".to_string()],
        )
        .resolution("Change the domain's firmware in its libvirt definition, or leave SecureBootEnable as it is.")
    }

    pub fn unauthorized() -> Self {
        Self::new(
            401,
            "NoValidSession",
            "There is no valid session established with the implementation.".to_string(),
            vec![],
        )
        .resolution("Establish a session before attempting any operations, or send valid Basic credentials.")
        .header("WWW-Authenticate", "Basic realm=\"shiftlab-bmc\"")
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(409, "ResourceInUse", message.into(), vec![])
            .resolution("Change the state of the resource and resubmit the request.")
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "GeneralError", message.into(), vec![])
            .resolution("Correct the request and resubmit it.")
    }

    pub fn internal() -> Self {
        Self::new(
            500,
            "InternalError",
            "The request failed due to an internal service error.  The service is still operational.".to_string(),
            vec![],
        )
        .resolution("Resubmit the request.  If the problem persists, consider resetting the service.")
    }

    pub fn request_timeout(seconds: u64) -> Self {
        Self::new(
            408,
            "GeneralError",
            format!("The request body did not arrive within {seconds} seconds."),
            vec![],
        )
        .resolution("Send the whole request body at once.")
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceTemporarilyUnavailable", message.into(), vec![])
            .resolution("Wait and resubmit the request.")
    }

    /// Full registry id, `Base.1.8.ResourceMissingAtURI`.
    pub fn code(&self) -> String {
        format!("{BASE_REGISTRY}.{}", self.message_id)
    }

    /// The JSON error body.
    pub fn body(&self) -> Value {
        let severity = if self.status >= 500 {
            "Critical"
        } else {
            "Warning"
        };
        json!({
            "error": {
                "code": self.code(),
                "message": self.message,
                "@Message.ExtendedInfo": [{
                    "@odata.type": "#Message.v1_1_1.Message",
                    "MessageId": self.code(),
                    "Message": self.message,
                    "MessageArgs": self.args,
                    "Severity": severity,
                    "MessageSeverity": severity,
                    "Resolution": self.resolution,
                }]
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_body_has_code_message_and_extended_info() {
        let e = RedfishError::not_found("/redfish/v1/Systems/x");
        let b = e.body();
        assert_eq!(e.status, 404);
        assert_eq!(b["error"]["code"], "Base.1.8.ResourceMissingAtURI");
        let info = &b["error"]["@Message.ExtendedInfo"][0];
        assert_eq!(info["MessageId"], "Base.1.8.ResourceMissingAtURI");
        assert_eq!(info["MessageArgs"][0], "/redfish/v1/Systems/x");
    }

    #[test]
    fn unauthorized_asks_for_basic() {
        let e = RedfishError::unauthorized();
        assert_eq!(e.status, 401);
        assert!(e
            .headers
            .iter()
            .any(|(k, v)| *k == "WWW-Authenticate" && v.starts_with("Basic")));
    }
}
