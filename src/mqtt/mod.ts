/** mqtt: the MQTT 3.1.1 / 5.0 codec and the topic mapping (pure); the door builds on these. */
export * from "./packets.ts";
export { MqttDecoder, type MqttDecoderOptions, type MqttRole } from "./codec.ts";
export {
  connackAnswersRefusedConnect,
  connackReturnCodeV4,
  encodePacket,
  hasProperties,
} from "./codec_encode.ts";
export { propertyAllowed } from "./properties.ts";
export {
  ariaTopicToMqtt,
  EMPTY_LEVEL,
  type FilterMapResult,
  isDollarTopic,
  mqttFilterMatches,
  mqttFilterToAria,
  mqttTopicToAria,
  type TopicMapResult,
} from "./topic_map.ts";
export { MqttDoor, type MqttDoorOptions, type MqttDoorStats } from "./mqtt_door.ts";
export { MqttSession } from "./mqtt_session.ts";
export { parseAriaFrom } from "./aria_from.ts";
export {
  ariaTopicMapping as mqttTopicMapping,
  type TopicMapping,
} from "./topic_mapping.ts";
